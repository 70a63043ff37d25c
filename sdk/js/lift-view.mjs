// componentize-js's generated bindings, made to read each call's input through one view of memory.
//
// The bindings (JavaScript that componentize-js 0.23 generates from the WIT and runs inside the
// component) lift an export's arguments out of linear memory field by field, each read through
// `dataView($memory)`: a call that compares `$memory.buffer` with the last view's buffer, and a
// `$memory.buffer` per string. Interpreted, that was most of what a child cost: the classic rules
// took 76k fuel per child read that way and 34k through one view, 1.42M and 1.07M per call at 5
// children (host/tests/js_call_fuel.rs). Everything an export lifts was written by the host
// before the call, below the memory's size at its start, and `$memory.buffer` over a size stays
// valid when the memory grows (StarlingMonkey hands a new buffer then and leaves the old one
// attached: the memory's base never moves). So one view made at the start of the export reads
// the whole input. The lift allocates nothing in linear memory (it only frees, and decodes into
// the JavaScript heap); the lowering of the result does allocate, and is left as generated.
//
// Each export's lift is the code from the function's start to its first use of the interface's
// result (`var ... = ret;`). A lift that allocates, or bindings of another shape, fail the build
// with a message naming this file: a newer componentize-js is to be measured before this is
// dropped or changed. How the splicer is reached: `installLiftView` wraps the splicer object
// componentize-js itself imports (one module instance per file), so the pinned package is used
// as installed, unpatched.

const EXPORT_START = /\n(async )?function (export_[\w$]+)\(([^)]*)\) \{\n/g;
const LIFT_END = /\n\s*var [^=;]+= ret;/g;
const READ = 'dataView($memory)';
const STRING_VIEW = 'new Uint8Array($memory.buffer, ';
const ALLOCATES = /\$realloc\(|_utf8AllocateAndEncode\(/;

/** The bindings with each export's lift reading through one view; throws if they are not the
 * shape this knows. Returns the text and how many reads now share a view. */
export function liftThroughOneView(bindings) {
  let out = '';
  let from = 0;
  let shared = 0;
  for (const start of bindings.matchAll(EXPORT_START)) {
    const bodyStart = start.index + start[0].length;
    LIFT_END.lastIndex = bodyStart;
    const end = LIFT_END.exec(bindings);
    if (end === null) throw new Error(`${shape()}: ${start[2]} never uses its result`);
    const lift = bindings.slice(bodyStart, end.index);
    const reads = count(lift, READ) + count(lift, STRING_VIEW);
    if (reads === 0) continue;
    if (ALLOCATES.test(lift)) throw new Error(`${shape()}: ${start[2]} allocates while it lifts`);
    out += bindings.slice(from, bodyStart);
    out += '  const $liftBuffer = $memory.buffer, $liftView = new DataView($liftBuffer);\n';
    out += lift.replaceAll(READ, '$liftView').replaceAll(STRING_VIEW, 'new Uint8Array($liftBuffer, ');
    from = end.index;
    shared += reads;
  }
  if (shared === 0) throw new Error(`${shape()}: no export reads its arguments through ${READ}`);
  return { bindings: out + bindings.slice(from), shared };
}

/** Make `splicer.spliceBindings` return bindings whose lifts read through one view; `result()`
 * says how many reads each splice shares (a build checks that its splice went through here). */
export function installLiftView(splicer) {
  const splice = splicer.spliceBindings;
  const spliced = [];
  splicer.spliceBindings = (...args) => {
    const out = splice(...args);
    const { bindings, shared } = liftThroughOneView(out.jsBindings);
    spliced.push(shared);
    return { ...out, jsBindings: bindings };
  };
  return { result: () => spliced, uninstall: () => (splicer.spliceBindings = splice) };
}

function count(text, needle) {
  return text.split(needle).length - 1;
}

function shape() {
  return 'sdk/js/lift-view.mjs: the bindings componentize-js generated are not the shape this knows';
}
