// The rewrites of componentize-js's bindings (../bindings-rewrite.mjs), on bindings of the shape
// 0.23 generates: each export's lift reads through one view and frees nothing, strings are lowered
// by the native encoder making the same bytes, the rest is left as generated, and bindings of
// another shape fail the build, naming the file. (That the rewritten bindings decide exactly as
// the generated ones on real components is the host's to show: differential.rs, wasi_js.rs,
// js_call_fuel.rs.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callSynchronously, encodeNatively, liftThroughOneView, rewriteBindings } from '../bindings-rewrite.mjs';

const ENCODER = `
function _utf8AllocateAndEncode(s, realloc, memory) {
  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
  if (s.length === 0) { return { ptr: 1, len: 0 }; }
  let len = 0;
  let codepoints = 0;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    codepoints++;
    if (ch < 0x80) { len += 1; }
    else if (ch < 0x800) { len += 2; }
    else if (ch >= 0xd800 && ch <= 0xdbff &&
    i + 1 < s.length &&
    (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      len += 4;
      i++;
    } else { len += 3; }
  }
  const ptr = realloc(0, 0, 1, len);
  const { read, written } = TEXT_ENCODER_UTF8.encodeInto(
  s,
  new Uint8Array(memory.buffer, ptr, len),
  );
  if (read !== s.length || written !== len) {
    throw new Error('failed to encode whole string');
  }
  const res = { ptr, len, codepoints };
  return res;
}
`;

const EXPORTS = `
function import_log(arg0, arg1) {
  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);
  dataView($memory).setUint32(arg0, encodeRes.len, true);
}

async function export_rules_0_1_0$info(arg0) {
  let ret;
  ret = await rules010Info();
  var {name: v0_0 } = ret;
  var encodeRes = _utf8AllocateAndEncode(v0_0, $realloc, $memory);
  dataView($memory).setUint32(arg0 + 4, encodeRes.len, true);
  return;
}

async function export_rules_0_1_0$reconcile(arg0, arg1) {
  var ptr0 = dataView($memory).getUint32(arg0 + 0, true);
  var len0 = dataView($memory).getUint32(arg0 + 4, true);
  var result0 = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, ptr0, len0));
  if (len0 !== 0) $dealloc(ptr0, len0, 1);
  var len2 = dataView($memory).getUint32(arg0 + 12, true);
  var base2 = dataView($memory).getUint32(arg0 + 8, true);
  if (len2 !== 0) $dealloc(base2, len2 * 16, 4);
  let ret;
  try {
    const hostRet1 = await rules010Reconcile({ name: result0, now: dataView($memory).getBigInt64(arg0 + 16, true) });
    ret = { tag: 'ok', val: hostRet1 };
  } catch (e) {
    ret = { tag: 'err', val: e };
  }
  var variant9 = ret;
  var result2 = $realloc(0, 0, 8, 40);
  dataView($memory).setUint32(arg1 + 4, result2, true);
  return;
}
`;

const GENERATED = ENCODER + EXPORTS;

test('each export lifts through one view made at its start and frees nothing; lowering and imports are left as generated', () => {
  const { bindings, reads, frees } = liftThroughOneView(GENERATED);
  assert.equal(reads, 6, 'five reads and a string view in the lift');
  assert.equal(frees, 2, 'a string and a list freed');
  const reconcile = bindings.slice(bindings.indexOf('async function export_rules_0_1_0$reconcile'));
  const [lift, lowering] = reconcile.split('var variant9 = ret;');
  assert.match(lift, /^async function export_rules_0_1_0\$reconcile\(arg0, arg1\) \{\n  const \$liftBuffer = \$memory\.buffer, \$liftView = new DataView\(\$liftBuffer\);\n/);
  assert.ok(!lift.includes('dataView($memory)') && !lift.includes('new Uint8Array($memory.buffer') && !lift.includes('$dealloc'), lift);
  assert.ok(lift.includes('new Uint8Array($liftBuffer, ptr0, len0)'));
  assert.ok(lift.includes('now: $liftView.getBigInt64(arg0 + 16, true)'), "the reads in the call's arguments too");
  assert.ok(lowering.includes('dataView($memory).setUint32(arg1 + 4, result2, true)'), 'the lowering allocates: left alone');
  const before = (text) => text.slice(0, text.indexOf('async function export_rules_0_1_0$reconcile'));
  assert.equal(before(bindings), before(GENERATED), 'the encoder, the import and an export that lifts nothing are unchanged');
});

test('bindings of another shape fail, naming the file', () => {
  const noExport = GENERATED.replaceAll('export_rules', 'exported_rules');
  assert.throws(() => liftThroughOneView(noExport), /sdk\/js\/bindings-rewrite\.mjs: .* no export reads its arguments/);
  const noResultUse = GENERATED.replace('var variant9 = ret;', 'var variant9 = ret.val;');
  assert.throws(() => liftThroughOneView(noResultUse), /export_rules_0_1_0\$reconcile never uses its result/);
  assert.throws(() => encodeNatively(EXPORTS), /no _utf8AllocateAndEncode/);
  assert.throws(() => encodeNatively(GENERATED.replace('codepoints++;', '')), /_utf8AllocateAndEncode has no codepoints\+\+;/);
  const readsCodepoints = GENERATED.replace('encodeRes.len, true);\n}', 'encodeRes.codepoints, true);\n}');
  assert.throws(() => encodeNatively(readsCodepoints), /a caller reads the encoded string's codepoints/);
});

test('a lift that allocates in linear memory is refused: a view made before an allocation may not see it', () => {
  const allocating = GENERATED.replace('  let ret;\n  try {', '  var p = $realloc(0, 0, 1, 8);\n  let ret;\n  try {');
  assert.throws(() => liftThroughOneView(allocating), /export_rules_0_1_0\$reconcile allocates while it lifts/);
});

/** The encoder the bindings define, run over a fake memory: what it allocated and wrote. */
function encodeWith(bindings, text) {
  const memory = { buffer: new ArrayBuffer(256) };
  let next = 16;
  const realloc = (_old, _oldSize, _align, size) => {
    const ptr = next;
    next += size;
    return ptr;
  };
  const source = bindings.slice(bindings.indexOf('function _utf8AllocateAndEncode'), bindings.indexOf('\nfunction import_log'));
  const encode = new Function('TEXT_ENCODER_UTF8', `${source}\nreturn _utf8AllocateAndEncode;`)(new TextEncoder());
  const { ptr, len } = encode(text, realloc, memory);
  return { ptr, len, bytes: [...new Uint8Array(memory.buffer, ptr, len)] };
}

test('the native encoder allocates and writes exactly the bytes the generated one did', () => {
  const { bindings, encoders } = encodeNatively(GENERATED);
  assert.equal(encoders, 1);
  assert.ok(!bindings.includes('codepoints'), 'the counting loop is gone');
  // ASCII, two- three- and four-byte characters, lone surrogates (U+FFFD in both), empty.
  for (const text of ['hikawa-sample-zundoko-001', 'Ki-yo-shi!', 'é', 'ズン', '\u{1F3B5}', 'a\ud800b', '\udc00', '']) {
    assert.deepEqual(encodeWith(bindings, text), encodeWith(GENERATED, text), JSON.stringify(text));
  }
  assert.throws(() => encodeWith(bindings, 5), /expected a string, received \[number\]/);
});

/** Run the bindings' `export_rules_0_1_0$reconcile` over a fake memory with `reconcile` as the
 * rule set's function: what it returned, and what is written at `arg1 + 4` when asked. */
function runReconcile(bindings, reconcile) {
  const memory = { buffer: new ArrayBuffer(256) };
  const view = new DataView(memory.buffer);
  view.setUint32(0, 64, true); // the name: 4 bytes at 64
  view.setUint32(4, 4, true);
  new Uint8Array(memory.buffer, 64, 4).set([0x7a, 0x75, 0x6e, 0x21]);
  view.setBigInt64(16, 7n, true);
  const run = new Function(
    '$memory', '$realloc', '$dealloc', 'rules010Reconcile', 'TEXT_DECODER_UTF8', 'TEXT_ENCODER_UTF8',
    `let dv = new DataView(new ArrayBuffer());
     const dataView = mem => dv.buffer === mem.buffer ? dv : dv = new DataView(mem.buffer);
     ${bindings}
     return export_rules_0_1_0$reconcile(0, 128);`,
  );
  let next = 160;
  const realloc = (_o, _os, _a, size) => ((next += size), next - size);
  const returned = run(memory, realloc, () => {}, reconcile, new TextDecoder(), new TextEncoder());
  return { returned, written: () => view.getUint32(132, true) };
}

test('each export runs synchronously and returns one settled promise', async () => {
  const { bindings, exports } = callSynchronously(GENERATED);
  assert.equal(exports, 2, 'info and reconcile');
  assert.ok(!bindings.includes('async function export_') && !bindings.includes('await '), bindings);
  assert.ok(bindings.includes('ret = rules010Info();') && bindings.includes('const hostRet1 = rules010Reconcile({'));
  assert.equal(bindings.match(/const \$exportSettled = Promise\.resolve\(\);/g).length, 1, 'made once');
  assert.equal(bindings.match(/return \$exportSettled;/g).length, 2);
  const seen = [];
  const { returned, written } = runReconcile(bindings, (observed) => (seen.push(observed), { actions: [] }));
  assert.deepEqual(seen, [{ name: 'zun!', now: 7n }], 'the rule set was called, before the export returned');
  assert.equal(written(), 160, 'and the result was written before it returned');
  assert.ok(returned instanceof Promise);
  assert.equal(await returned, undefined, 'what the async function settled with');
  // What the generated async function does, for comparison: the same result, only later.
  const generated = runReconcile(GENERATED, () => ({ actions: [] }));
  assert.equal(generated.written(), 0, 'not yet written when the generated export returns');
  assert.equal(await generated.returned, undefined);
  assert.equal(generated.written(), 160);
});

test('an export of another shape is refused, naming the file', () => {
  const twoAwaits = GENERATED.replace('  return;\n}\n\nasync function export_rules_0_1_0$reconcile', '  await 0;\n  return;\n}\n\nasync function export_rules_0_1_0$reconcile');
  assert.throws(() => callSynchronously(twoAwaits), /bindings-rewrite\.mjs: .* export_rules_0_1_0\$info awaits 2 times, not once/);
  const returnsValue = GENERATED.replace('  dataView($memory).setUint32(arg1 + 4, result2, true);\n  return;', '  return result2;');
  assert.throws(() => callSynchronously(returnsValue), /export_rules_0_1_0\$reconcile does not end in its only `return;`/);
  const earlyReturn = GENERATED.replace('  var variant9 = ret;', '  if (!ret) return;\n  var variant9 = ret;');
  assert.throws(() => callSynchronously(earlyReturn), /export_rules_0_1_0\$reconcile does not end in its only `return;`/);
  assert.throws(() => callSynchronously(GENERATED.replaceAll('async function', 'function')), /no export is an async function/);
});

test('the four rewrites together', () => {
  const { bindings, reads, frees, encoders, synchronous } = rewriteBindings(GENERATED);
  assert.deepEqual({ reads, frees, encoders, synchronous }, { reads: 6, frees: 2, encoders: 1, synchronous: 2 });
  assert.ok(bindings.includes('$liftView') && bindings.includes('TEXT_ENCODER_UTF8.encode(s)'));
  assert.ok(bindings.includes('return $exportSettled;') && !bindings.includes('await '));
});
