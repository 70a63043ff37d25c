// The realm the component's bindings run in, warmed while the component is built.
//
// componentize-js runs its generated bindings (the code that reads each call's input out of
// linear memory and writes the plan back) as StarlingMonkey's initializer script, in a global of
// their own, not the rule set's. SpiderMonkey makes a global's standard classes on their first
// use: String's methods, Promise, Uint8Array, BigInt, the stack frames an Error or a Promise
// records. The bindings first use them inside a call, and every call starts from the snapshot
// taken when the build ended, so every call made them again: a call that does nothing took 950k
// fuel, 520k with them made here; the classic rules at 5 children 2.22M, 1.42M
// (host/tests/js_call_fuel.rs). Run once here, in the bindings' global, they are in the snapshot.
//
// The way in is a function the bindings made: the host's `log` import. Its constructor is the
// bindings' global's `Function`, so code it compiles runs there. Only standard built-ins are
// touched (nothing of the bindings' own, whose names are componentize-js's to change); nothing
// reads the clock or draws random numbers, and what is made here is dropped.

import { log as hostLog } from 'zundokokiyoshi:rules/log@0.1.0';

// What the bindings do to lift an input and lower a plan, on built-ins only.
const WARM_UP = `
  const buffer = new ArrayBuffer(64);
  const view = new DataView(buffer);
  view.setInt8(0, 1, true); view.getUint8(0, true);
  view.setInt32(4, 7, true); view.getInt32(4, true); view.setUint32(8, 7, true); view.getUint32(8, true);
  view.setBigInt64(16, -1n, true); view.getBigInt64(16, true);
  BigInt.asUintN(64, BigInt(view.getBigInt64(16, true)));
  const text = 'warm-up-zundoko-001 \\u00e9\\u3042\\ud83c\\udfb5';
  let codes = 0;
  for (let i = 0; i < text.length; i++) codes += text.charCodeAt(i);
  new Uint8Array(buffer, 32, 16).fill(codes & 0x7f);
  const list = [];
  list.push([text, String(codes)]);
  list.push({ name: text, index: codes >>> 0, word: 'Zun', saidAt: undefined });
  const { name, index } = list[1];
  try {
    throw new TypeError(\`"\${name}" is not one of the cases of \${index}\`);
  } catch (e) {
    Object.prototype.hasOwnProperty.call(e, 'payload');
    JSON.stringify(e instanceof Error ? e.message : e);
  }
  // An async function's first run; nothing awaited, so no job is left for a call to run.
  (async () => ({ tag: 'ok', val: list }))();
  return list.length;
`;

/** Run the warm-up in the bindings' global (the rule set's own, should a later componentize-js
 * run the bindings there). */
export function warmBindingsRealm() {
  const BindingsFunction = hostLog.constructor;
  new BindingsFunction(WARM_UP)();
}
