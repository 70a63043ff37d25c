// Native tests: whole songs on a virtual clock, no wasm (`make test-rules NAME=__NAME__`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newHikawa, sing } from 'zundoko-kit/testing';
import { CALL, KIYOSHI, MyRules } from '../rules.js';

test('every song ends with one Kiyoshi right after the call', () => {
  for (let seed = 0; seed < 500; seed++) {
    const song = sing(new MyRules(), newHikawa(500), seed);
    assert.equal(song.kiyoshi, KIYOSHI, `seed ${seed}: ${song.words}`);
    assert.deepEqual(song.words.slice(-CALL.length), CALL, `seed ${seed}: ${song.words}`);
    assert.deepEqual(song.afterKiyoshi, [], `seed ${seed}: said ${song.afterKiyoshi} after the Kiyoshi`);
  }
});

test('words come one interval apart', () => {
  const song = sing(new MyRules(), newHikawa(500), 7);
  for (let i = 1; i < song.times.length; i++) assert.equal(song.times[i] - song.times[i - 1], 500n);
});
