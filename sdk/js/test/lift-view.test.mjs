// The rewrite of componentize-js's bindings (../lift-view.mjs), on bindings of the shape 0.23
// generates: each export's lift reads through one view, the rest is left as generated, and
// bindings of another shape fail the build, naming the file. (That the rewritten bindings lift
// exactly what the generated ones did is the host's to show, on real components: differential.rs,
// wasi_js.rs, js_call_fuel.rs.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { liftThroughOneView } from '../lift-view.mjs';

const GENERATED = `
function import_log(arg0, arg1) {
  var encodeRes = _utf8AllocateAndEncode(arg1, $realloc, $memory);
  dataView($memory).setUint32(arg0, 1, true);
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
  let ret;
  try {
    const hostRet1 = await rules010Reconcile({ name: result0, now: dataView($memory).getBigInt64(arg0 + 8, true) });
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

test('each export lifts through one view made at its start; lowering and imports are left as generated', () => {
  const { bindings, shared } = liftThroughOneView(GENERATED);
  assert.equal(shared, 4, 'three reads and a string view in the lift');
  const reconcile = bindings.slice(bindings.indexOf('async function export_rules_0_1_0$reconcile'));
  const [lift, lowering] = reconcile.split('var variant9 = ret;');
  assert.match(lift, /^async function export_rules_0_1_0\$reconcile\(arg0, arg1\) \{\n  const \$liftBuffer = \$memory\.buffer, \$liftView = new DataView\(\$liftBuffer\);\n/);
  assert.ok(!lift.includes('dataView($memory)') && !lift.includes('new Uint8Array($memory.buffer'), lift);
  assert.ok(lift.includes('new Uint8Array($liftBuffer, ptr0, len0)'));
  assert.ok(lift.includes('now: $liftView.getBigInt64(arg0 + 8, true)'), 'the reads in the call\'s arguments too');
  assert.ok(lowering.includes('dataView($memory).setUint32(arg1 + 4, result2, true)'), 'the lowering allocates: left alone');
  const untouched = (text) => text.slice(0, text.indexOf('async function export_rules_0_1_0$reconcile'));
  assert.equal(untouched(bindings), untouched(GENERATED), 'the import and an export that lifts nothing are unchanged');
});

test('bindings of another shape fail, naming the file', () => {
  const noExport = GENERATED.replaceAll('export_rules', 'exported_rules');
  assert.throws(() => liftThroughOneView(noExport), /sdk\/js\/lift-view\.mjs: .* no export reads its arguments/);
  const noResultUse = GENERATED.replace('var variant9 = ret;', 'var variant9 = ret.val;');
  assert.throws(() => liftThroughOneView(noResultUse), /export_rules_0_1_0\$reconcile never uses its result/);
});

test('a lift that allocates in linear memory is refused: a view made before an allocation may not see it', () => {
  const allocating = GENERATED.replace('  let ret;\n  try {', '  var p = $realloc(0, 0, 1, 8);\n  let ret;\n  try {');
  assert.throws(() => liftThroughOneView(allocating), /export_rules_0_1_0\$reconcile allocates while it lifts/);
});
