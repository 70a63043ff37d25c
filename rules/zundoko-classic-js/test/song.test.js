// Native tests: whole songs on a virtual clock, no wasm (`make test-rules NAME=zundoko-classic-js`).
// The same checks as the Rust rules' (rules/zundoko-classic/tests/song.rs), and the decisions
// that must match them word for word.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RuleSet, mix } from 'zundoko-kit/song';
import { T0, newHikawa, sing } from 'zundoko-kit/testing';
import { RuleError } from 'zundoko-kit';
import { classic } from '../rules.js';

const CALL = ['Zun', 'Zun', 'Zun', 'Zun', 'Doko'];

test('every song ends with one Kiyoshi right after the call', () => {
  for (let seed = 0; seed < 500; seed++) {
    const song = sing(classic(), newHikawa(500), seed);
    assert.equal(song.kiyoshi, 'Ki-yo-shi!', `seed ${seed}: ${song.words}`);
    assert.deepEqual(song.words.slice(-5), CALL, `seed ${seed}: ${song.words}`);
    assert.deepEqual(song.afterKiyoshi, [], `seed ${seed}`);
    assert.ok(song.words.every((w) => w === 'Zun' || w === 'Doko'), `seed ${seed}: ${song.words}`);
  }
});

test('words come one interval apart', () => {
  const song = sing(classic(), newHikawa(500), 7);
  for (let i = 1; i < song.times.length; i++) assert.equal(song.times[i] - song.times[i - 1], 500n);
});

test("mix is SplitMix64's finaliser", () => {
  // Values from the Rust SDK's `mix` (sdk/rust/src/song.rs).
  assert.equal(mix(0n), 0xe220a8397b1dcdafn);
  assert.equal(mix(1n), 0x910a2dec89025cc1n);
  assert.equal(mix((1n << 64n) - 1n), 0xe4d971771b652c20n);
});

test('the word comes from the entropy alone', () => {
  const observed = newHikawa(500);
  for (const e of [0n, 1n, 2n, 3n, (1n << 64n) - 1n]) {
    observed.entropy = e;
    const word = classic().reconcile(observed).actions[0].val.word;
    assert.equal(word, mix(e) >> 63n === 0n ? 'Zun' : 'Doko');
  }
});

test('the first plan', () => {
  const observed = newHikawa(500);
  observed.entropy = 0n; // mix(0) has its top bit set: Doko
  assert.deepEqual(classic().reconcile(observed), {
    actions: [
      { tag: 'say', val: { kind: 'zundoko', namespace: 'default', name: 'hikawa-sample-zundoko-001', index: 1, word: 'Doko' } },
      { tag: 'set-status', val: { phase: 'Singing', numZundokosSaid: 1, kiyoshied: false, message: '1 words said' } },
      { tag: 'requeue-after', val: 500n },
    ],
  });
});

const said = (words, at = T0) =>
  words.map((word, i) => ({ name: `hikawa-sample-zundoko-${String(i + 1).padStart(3, '0')}`, index: i + 1, word, saidAt: at }));

test('waits for the interval and says so once', () => {
  const observed = newHikawa(500);
  observed.zundokos = said(['Zun']);
  observed.now = T0 + 200n;
  assert.deepEqual(classic().reconcile(observed).actions, [
    { tag: 'set-status', val: { phase: 'Singing', numZundokosSaid: 1, kiyoshied: false, message: '1 words said' } },
    { tag: 'requeue-after', val: 300n },
  ]);
  observed.hikawa.status = { numZundokosSaid: 1, kiyoshied: false, phase: 'Singing' };
  assert.deepEqual(classic().reconcile(observed).actions, [{ tag: 'requeue-after', val: 300n }]);
});

test('Kiyoshi after the call, then nothing', () => {
  const observed = newHikawa(500);
  observed.zundokos = said(['Doko', ...CALL]);
  observed.now = T0 + 500n;
  assert.deepEqual(classic().reconcile(observed).actions, [
    { tag: 'say', val: { kind: 'kiyoshi', namespace: 'default', name: 'hikawa-sample-kiyoshi', index: 7, word: 'Ki-yo-shi!' } },
    { tag: 'set-status', val: { phase: 'Kiyoshied', numZundokosSaid: 6, kiyoshied: true, message: 'Ki-yo-shi! after 6 words' } },
  ]);
  observed.kiyoshi = { name: 'hikawa-sample-kiyoshi', index: 7, word: 'Ki-yo-shi!', saidAt: T0 + 500n };
  assert.deepEqual(classic().reconcile(observed).actions, [
    { tag: 'set-status', val: { phase: 'Kiyoshied', numZundokosSaid: 6, kiyoshied: true, message: 'the song is over' } },
  ]);
  observed.hikawa.status = { numZundokosSaid: 6, kiyoshied: true, phase: 'Kiyoshied' };
  assert.deepEqual(classic().reconcile(observed).actions, []);
});

test('a missing word is an inconsistent song', () => {
  const observed = newHikawa(500);
  observed.zundokos = [said(['Zun'])[0], { name: 'hikawa-sample-zundoko-003', index: 3, word: 'Zun', saidAt: T0 }];
  assert.throws(() => classic().reconcile(observed), {
    kind: 'inconsistent-song',
    message: 'expected word 2 but found 3 (hikawa-sample-zundoko-003): a word is missing',
  });
});

test('bad params are refused with the Rust message', () => {
  for (const [params, message] of [
    [{ zun: ' ' }, 'params.zun must be a non-empty word'],
    [{ kiyoshi: '' }, 'params.kiyoshi must be a non-empty word'],
    [{ zun: 'Doko' }, 'params.zun and params.doko must differ (both are "Doko")'],
    [{ zun: 'a"b\n', doko: 'a"b\n' }, 'params.zun and params.doko must differ (both are "a\\"b\\n")'],
    [{ zuns: '0' }, 'params.zuns must be a whole number from 1 to 16, found "0"'],
    [{ zuns: '17' }, 'params.zuns must be a whole number from 1 to 16, found "17"'],
    [{ zuns: ' 3' }, 'params.zuns must be a whole number from 1 to 16, found " 3"'],
    [{ zuns: '-1' }, 'params.zuns must be a whole number from 1 to 16, found "-1"'],
    [{ zuns: '٣' }, 'params.zuns must be a whole number from 1 to 16, found "٣"'],
  ]) {
    assert.throws(() => classic().reconcile(newHikawa(500, params)), (e) => {
      assert.ok(e instanceof RuleError);
      assert.equal(e.kind, 'invalid-params');
      assert.equal(e.message, message);
      return true;
    }, JSON.stringify(params));
  }
});

test("a word of U+FEFF is a word, as in Rust (JavaScript's trim would drop it)", () => {
  const song = sing(classic(), newHikawa(0, { zun: '\ufeff' }), 1);
  assert.equal(song.kiyoshi, 'Ki-yo-shi!');
});

test('params change the words and the call', () => {
  const params = { zun: 'ズン', doko: 'ドコ', kiyoshi: 'キ・ヨ・シ！', zuns: '+2' };
  for (let seed = 0; seed < 50; seed++) {
    const song = sing(classic(), newHikawa(0, params), seed);
    assert.equal(song.kiyoshi, 'キ・ヨ・シ！');
    assert.deepEqual(song.words.slice(-3), ['ズン', 'ズン', 'ドコ']);
  }
});

test('the same zun and doko are refused without params too, as in Rust', () => {
  // The engine skips the params' copy when there are none; the words must still differ.
  const same = new RuleSet({ info: classic().info(), words: { zun: 'Zun', doko: 'Zun', kiyoshi: 'K' } });
  assert.throws(() => same.reconcile(newHikawa(500)), (e) => e instanceof RuleError && e.kind === 'invalid-params');
});

test('module info', () => {
  const info = classic().info();
  assert.equal(info.name, 'zundoko-classic-js');
  assert.equal(info.version, '0.1.0');
  assert.ok(info.description);
});

test('the rules are called again as the host calls them', async () => {
  // The WIT contract's `requeue-after`, as the host implements it (Plan::next_call in Rust):
  // after the callback if asked; else at once if the plan changed what the rules observe (a word,
  // the status's phase, count or kiyoshied); else not until something else changes.
  const { nextCall } = await import('zundoko-kit');
  const observed = newHikawa(0n);
  const say = { tag: 'say', val: { kind: 'zundoko', namespace: 'default', name: 'hikawa-sample-zundoko-001', index: 1, word: 'Zun' } };
  const status = (message) => ({ tag: 'set-status', val: { phase: 'Singing', numZundokosSaid: 0, kiyoshied: false, message } });
  assert.equal(nextCall({ actions: [say, { tag: 'requeue-after', val: 500n }] }, observed), 500n);
  assert.equal(nextCall({ actions: [say] }, observed), 0n);
  assert.equal(nextCall({ actions: [status('')] }, observed), 0n);
  observed.hikawa.status = { numZundokosSaid: 0, kiyoshied: false, phase: 'Singing' };
  assert.equal(nextCall({ actions: [status('a new message')] }, observed), undefined);
  assert.equal(nextCall({ actions: [] }, observed), undefined);
  observed.zundokos.push({ name: 'hikawa-sample-zundoko-001', index: 1, word: 'Zun', saidAt: T0 });
  assert.equal(nextCall({ actions: [say] }, observed), undefined, 'a word already said changes nothing');
});
