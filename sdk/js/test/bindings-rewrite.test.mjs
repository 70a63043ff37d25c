// The rewrites of componentize-js's bindings (../bindings-rewrite.mjs), on bindings of the shape
// 0.23 generates: each export's lift reads through typed arrays and frees nothing, strings are lowered
// by the native encoder making the same bytes, the rest is left as generated, and bindings of
// another shape fail the build, naming the file. (That the rewritten bindings decide exactly as
// the generated ones on real components is the host's to show: differential.rs, wasi_js.rs,
// js_call_fuel.rs.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callSynchronously, encodeNatively, liftThroughTypedArrays, lowerThroughOneView, rewriteBindings } from '../bindings-rewrite.mjs';

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

test('each export lifts through typed arrays and frees nothing; lowering and imports are left as generated', () => {
  const { bindings, reads, frees } = liftThroughTypedArrays(GENERATED);
  assert.equal(reads, 6, 'five reads and a string view in the lift');
  assert.equal(frees, 2, 'a string and a list freed');
  const reconcile = bindings.slice(bindings.indexOf('async function export_rules_0_1_0$reconcile'));
  const [lift, lowering] = reconcile.split('var variant9 = ret;');
  assert.ok(
    lift.startsWith(
      'async function export_rules_0_1_0$reconcile(arg0, arg1) {\n' +
        '  const $liftBuffer = $memory.buffer;\n' +
        '  if ($liftViews.buffer !== $liftBuffer) $liftViews = $liftViewsOf($liftBuffer);\n' +
        '  const { $u32, $i64 } = $liftViews, $decoder = TEXT_DECODER_UTF8, $U8 = Uint8Array;\n',
    ),
    lift,
  );
  assert.ok(!lift.includes('dataView($memory)') && !lift.includes('new Uint8Array($memory.buffer') && !lift.includes('$dealloc'), lift);
  assert.ok(lift.includes('var len0 = $u32[(arg0 + 4) >>> 2];'));
  assert.ok(lift.includes('$decoder.decode(new $U8($liftBuffer, ptr0, len0))'));
  assert.ok(lift.includes('now: $i64[(arg0 + 16) >>> 3]'), "the reads in the call's arguments too");
  assert.ok(lowering.includes('dataView($memory).setUint32(arg1 + 4, result2, true)'), 'the lowering allocates: left alone');
  const arrays =
    "\n// The lifts' typed arrays over memory (sdk/js/bindings-rewrite.mjs, rewrite 1).\n" +
    'const $liftViewsOf = (buffer) => ({ buffer, $u32: new Uint32Array(buffer), $i64: new BigInt64Array(buffer) });\nlet $liftViews = $liftViewsOf($memory.buffer);\n';
  assert.ok(bindings.includes(arrays), 'the arrays each lift reads, made when the bindings run');
  const before = (text) => text.slice(0, text.indexOf('async function export_rules_0_1_0$reconcile'));
  assert.equal(before(bindings).replace(arrays, ''), before(GENERATED), 'the encoder, the import and an export that lifts nothing are unchanged');
});

// A lift of every field type a DataView getter reads, at aligned addresses, as componentize-js
// generates it: [address, getter] pairs over a record at arg0.
const FIELDS = [
  [0, 'Int8'], [1, 'Uint8'], [2, 'Int16'], [4, 'Uint16'], [8, 'Int32'], [12, 'Uint32'],
  [16, 'BigInt64'], [24, 'BigUint64'], [32, 'Float32'], [40, 'Float64'],
];
const EVERY_FIELD = `
async function export_every_field(arg0) {
  var s = TEXT_DECODER_UTF8.decode(new Uint8Array($memory.buffer, 100, 3));
  let ret;
  ret = await everyField([s, ${FIELDS.map(([at, type]) => `dataView($memory).get${type}(arg0 + ${at}, true)`).join(', ')}]);
  var variant0 = ret;
  return;
}
`;

/** Evaluate `bindings` once over a memory whose `buffer` can be replaced (as a memory's is when
 * it grows), and return a call of the export at `arg0` with what it passed on. */
function everyFieldExport(bindings, memory) {
  let seen;
  const exportFn = new Function('$memory', 'everyField', 'TEXT_DECODER_UTF8', `${bindings}\nreturn export_every_field;`)(
    memory, (fields) => (seen = fields), new TextDecoder(),
  );
  return async (arg0) => (await exportFn(arg0), seen);
}

/** A buffer with the fields (signs, high bits, fractions) at `arg0` and "Zun" at 100. */
function memoryWithFields(arg0, value) {
  const buffer = new ArrayBuffer(256);
  const view = new DataView(buffer);
  view.setInt8(arg0, -5); view.setUint8(arg0 + 1, 250); view.setInt16(arg0 + 2, -30000, true);
  view.setUint16(arg0 + 4, 65000, true); view.setInt32(arg0 + 8, -value, true); view.setUint32(arg0 + 12, 0xfffffff0 - value, true);
  view.setBigInt64(arg0 + 16, -(1n << 62n) - BigInt(value), true); view.setBigUint64(arg0 + 24, (1n << 64n) - 1n - BigInt(value), true);
  view.setFloat32(arg0 + 32, 1.5, true); view.setFloat64(arg0 + 40, -0.1 * value, true);
  new Uint8Array(buffer, 100, 3).set([0x5a, 0x75, 0x6e]);
  return buffer;
}

test('a lift through typed arrays reads what the DataView getters read, also after the memory has a new buffer', async () => {
  const { bindings, reads } = liftThroughTypedArrays(EVERY_FIELD);
  assert.equal(reads, FIELDS.length + 1);
  assert.ok(!bindings.includes('dataView('), bindings);
  const generatedMemory = { buffer: memoryWithFields(48, 1) };
  const rewrittenMemory = { buffer: memoryWithFields(48, 1) };
  const generated = everyFieldExport(EVERY_FIELD.replace(/\bdataView\(/g, 'new DataView(').replace(/\(\$memory\)/g, '($memory.buffer)'), generatedMemory);
  const rewritten = everyFieldExport(bindings, rewrittenMemory);
  const expected = await generated(48);
  assert.deepEqual(expected.slice(0, 3), ['Zun', -5, 250]);
  assert.deepEqual(await rewritten(48), expected);
  // The memory grew: a new buffer, with other values. The arrays made for the first one are not
  // used for it.
  generatedMemory.buffer = memoryWithFields(48, 7);
  rewrittenMemory.buffer = memoryWithFields(48, 7);
  const grown = await generated(48);
  assert.notDeepEqual(grown, expected);
  assert.deepEqual(await rewritten(48), grown);
});

test('a lift reading memory otherwise than by a little-endian getter of a plain address is refused, naming the file', () => {
  const bigEndian = EVERY_FIELD.replace('getUint32(arg0 + 12, true)', 'getUint32(arg0 + 12)');
  assert.throws(() => liftThroughTypedArrays(bigEndian), /sdk\/js\/bindings-rewrite\.mjs: .* export_every_field reads memory otherwise than by a little-endian DataView getter/);
  const computed = EVERY_FIELD.replace('getUint32(arg0 + 12, true)', 'getUint32(f(arg0), true)');
  assert.throws(() => liftThroughTypedArrays(computed), /export_every_field reads memory otherwise/);
  const viewItself = EVERY_FIELD.replace('var s =', 'var v = dataView($memory);\n  var s =');
  assert.throws(() => liftThroughTypedArrays(viewItself), /export_every_field reads memory otherwise/);
});

test('bindings of another shape fail, naming the file', () => {
  const noExport = GENERATED.replaceAll('export_rules', 'exported_rules');
  assert.throws(() => liftThroughTypedArrays(noExport), /sdk\/js\/bindings-rewrite\.mjs: .* no export reads its arguments/);
  const noResultUse = GENERATED.replace('var variant9 = ret;', 'var variant9 = ret.val;');
  assert.throws(() => liftThroughTypedArrays(noResultUse), /export_rules_0_1_0\$reconcile never uses its result/);
  assert.throws(() => encodeNatively(EXPORTS), /no _utf8AllocateAndEncode/);
  assert.throws(() => encodeNatively(GENERATED.replace('codepoints++;', '')), /_utf8AllocateAndEncode has no codepoints\+\+;/);
  const readsCodepoints = GENERATED.replace('encodeRes.len, true);\n}', 'encodeRes.codepoints, true);\n}');
  assert.throws(() => encodeNatively(readsCodepoints), /a caller reads the encoded string's codepoints/);
});

test('a lift that allocates in linear memory is refused: a view made before an allocation may not see it', () => {
  const allocating = GENERATED.replace('  let ret;\n  try {', '  var p = $realloc(0, 0, 1, 8);\n  let ret;\n  try {');
  assert.throws(() => liftThroughTypedArrays(allocating), /export_rules_0_1_0\$reconcile allocates while it lifts/);
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

test("each export's lowering writes through one view, made when it starts and after each allocation; imports are left as generated", () => {
  const { bindings, writes } = lowerThroughOneView(GENERATED);
  assert.equal(writes, 2, "info's and reconcile's");
  assert.ok(bindings.includes('function import_log(arg0, arg1) {\n  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);\n  dataView($memory).setUint32(arg0, encodeRes.len, true);'), 'an import writes as generated');
  assert.ok(bindings.includes('  var {name: v0_0 } = ret;\n  let $lowerView = dataView($memory);\n  var encodeRes = _utf8AllocateAndEncode(v0_0, $realloc, $memory);\n  $lowerView.setUint32(arg0 + 4, encodeRes.len, true);'), bindings);
  assert.ok(
    bindings.includes('  var variant9 = ret;\n  let $lowerView = dataView($memory);\n  var result2 = $realloc(0, 0, 8, 40);\n  $lowerView = dataView($memory);\n  $lowerView.setUint32(arg1 + 4, result2, true);'),
    bindings,
  );
  const lift = (text) => text.slice(text.indexOf('async function export_rules_0_1_0$reconcile'), text.indexOf('var variant9 = ret;'));
  assert.equal(lift(bindings), lift(GENERATED), 'the lift is not this rewrite\'s');
});

test('a lowering writes where the generated one does, also into memory an allocation grew', async () => {
  // The allocation grows the memory: a new buffer with the old contents, the allocation past the
  // old one's end. A view made before it cannot reach there; the generated one looked again.
  const grow = (memory) => () => {
    const old = memory.buffer;
    memory.buffer = new ArrayBuffer(old.byteLength + 256);
    new Uint8Array(memory.buffer).set(new Uint8Array(old));
    return old.byteLength + 8;
  };
  const run = (bindings) => {
    const memory = { buffer: new ArrayBuffer(256) };
    const view = new DataView(memory.buffer);
    view.setUint32(0, 64, true);
    view.setUint32(4, 4, true);
    new Uint8Array(memory.buffer, 64, 4).set([0x7a, 0x75, 0x6e, 0x21]);
    view.setBigInt64(16, 7n, true);
    const lowering = bindings.replace('$realloc(0, 0, 8, 40);', '$realloc(0, 0, 8, 40);\n  $written(result2);');
    let written;
    const exportFn = new Function(
      '$memory', '$realloc', '$dealloc', 'rules010Reconcile', 'TEXT_DECODER_UTF8', 'TEXT_ENCODER_UTF8', '$written',
      `let dv = new DataView(new ArrayBuffer());
       const dataView = mem => dv.buffer === mem.buffer ? dv : dv = new DataView(mem.buffer);
       ${lowering}
       return export_rules_0_1_0$reconcile;`,
    )(memory, grow(memory), () => {}, () => ({ actions: [] }), new TextDecoder(), new TextEncoder(), (at) => (written = at));
    return exportFn(0, 128).then(() => ({ at: written, value: new DataView(memory.buffer).getUint32(132, true), size: memory.buffer.byteLength }));
  };
  const generated = await run(GENERATED);
  assert.deepEqual(generated, { at: 264, value: 264, size: 512 }, 'the generated lowering, after the memory grew');
  assert.deepEqual(await run(lowerThroughOneView(GENERATED).bindings), generated);
  // Written through the view made before the allocation, the pointer would be lost.
  const stale = lowerThroughOneView(GENERATED).bindings.replace('\n  $lowerView = dataView($memory);', '');
  assert.equal((await run(stale)).value, 0);
});

test('a lowering that allocates or uses its view otherwise, or uses its result inside a block, is refused, naming the file', () => {
  const inline = GENERATED.replace('  var result2 = $realloc(0, 0, 8, 40);\n  dataView($memory).setUint32(arg1 + 4, result2, true);', '  dataView($memory).setUint32(arg1 + 4, $realloc(0, 0, 8, 40), true);');
  assert.throws(() => lowerThroughOneView(inline), /bindings-rewrite\.mjs: .* export_rules_0_1_0\$reconcile allocates otherwise than by `var \.\.\. = \$realloc\(\.\.\.\);` while it lowers/);
  const passed = GENERATED.replace('  var result2 = $realloc(0, 0, 8, 40);', '  var result2 = $realloc(0, 0, 8, 40);\n  keep(dataView($memory));');
  assert.throws(() => lowerThroughOneView(passed), /export_rules_0_1_0\$reconcile uses its lowering's view otherwise than to write through it/);
  // Reading back what it wrote is a use other than writing, though a method of the view.
  const reads = GENERATED.replace('  var result2 = $realloc(0, 0, 8, 40);', '  var result2 = $realloc(0, 0, 8, 40);\n  var back = dataView($memory).getUint32(arg1 + 4, true);');
  assert.throws(() => lowerThroughOneView(reads), /export_rules_0_1_0\$reconcile uses its lowering's view otherwise than to write through it/);
  const nested = GENERATED.replace('  var variant9 = ret;', '  {\n    var variant9 = ret;\n  }');
  assert.throws(() => lowerThroughOneView(nested), /export_rules_0_1_0\$reconcile uses its result inside a block/);
  assert.throws(() => lowerThroughOneView(GENERATED.replaceAll('dataView($memory).set', 'other.set')), /no export writes its result through dataView\(\$memory\)/);
});

test('bindings that already use a name the rewrites introduce are refused, naming it', () => {
  for (const name of ['$liftViews', '$u32', '$exportSettled', '$decoder', '$lowerView']) {
    const using = GENERATED.replace('function import_log(arg0, arg1) {', `function import_log(arg0, arg1) {\n  const ${name} = 1;`);
    assert.throws(() => rewriteBindings(using), new RegExp(`bindings-rewrite\\.mjs: .* already use \\${name}, which the rewrites introduce`));
  }
  // A longer name that starts with one of them is another name.
  const longer = GENERATED.replace('function import_log(arg0, arg1) {', 'function import_log(arg0, arg1) {\n  const $u32x = 1;');
  assert.doesNotThrow(() => rewriteBindings(longer));
});

test('the five rewrites together', () => {
  const { bindings, reads, frees, encoders, writes, synchronous } = rewriteBindings(GENERATED);
  assert.deepEqual({ reads, frees, encoders, writes, synchronous }, { reads: 6, frees: 2, encoders: 1, writes: 2, synchronous: 2 });
  assert.ok(bindings.includes('$lowerView.setUint32(arg1 + 4, result2, true);'));
  assert.ok(bindings.includes('$liftViews') && bindings.includes('TEXT_ENCODER_UTF8.encode(s)'));
  assert.ok(bindings.includes('return $exportSettled;') && !bindings.includes('await '));
});
