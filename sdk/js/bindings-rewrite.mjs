// componentize-js's generated bindings, rewritten for what a call costs.
//
// The bindings are JavaScript that componentize-js 0.23 generates from the WIT and runs inside the
// component: they read each call's input out of linear memory, call the rule set, and write the
// plan back. SpiderMonkey interprets them (no JIT in wasm), in every call, so their per-field and
// per-character steps were most of a JavaScript call (the classic rules, fuel per call at 5
// children: 2.22M before the kit's warm-up, 1.42M after it, 0.54M with these rewrites; per child
// 76k -> 23k; host/tests/js_call_fuel.rs bounds them). Five rewrites, each exact about what it
// replaces:
//
// 1. An export reads its input through typed arrays over memory, made once per memory buffer.
//    Generated, every field is read through `dataView($memory)` (a call comparing `$memory.buffer`
//    with the last view's, then a DataView method: two calls into the engine per field) and every
//    string through another `$memory.buffer`. Now a field is an element of the typed array of its
//    type (`$u32[(base + 4) >>> 2]`), which the interpreter reads without a call, and the arrays
//    are made when the bindings run, so a call finds them in the snapshot; a call whose memory
//    has a new buffer (it grew since) makes them again. Everything an export lifts was written by
//    the host before the call, below the memory's size at its start, and a buffer over a size
//    stays valid when the memory grows (StarlingMonkey then hands out a new buffer and leaves the
//    old one attached: the memory's base never moves). The lift allocates nothing in linear
//    memory (it decodes into the JavaScript heap), so the arrays read all of it. An element's
//    index is its address over its size: exact because the canonical ABI places every field at
//    its alignment in a record at its own (the generated code checks each list's, and wasmtime
//    the arguments' pointer it allocates), and wasm is little-endian, as the reads asked for. The
//    lift's decoder and `Uint8Array` are bound to locals once, not looked up for every string.
//    (The classic rules: 29.9k fuel -> 22.9k per child, 706k -> 651k at 5 children.)
// 2. The lifted input is not freed. Generated, each string and list is handed back to the
//    allocator (`$dealloc`) once decoded: wasted in an instance the operator drops after the
//    call (every call runs in a fresh one); the input stays counted in the call's memory.
// 3. A string is lowered by the engine's own encoder. Generated, its UTF-8 length is counted
//    character by character in interpreted JavaScript before the allocation; `TextEncoder.encode`
//    makes the same bytes natively (a lone surrogate becomes U+FFFD, three bytes, in both), and
//    they are copied into the allocation.
// 4. An export runs synchronously. Generated, each export is an `async function` that `await`s
//    the rule set's function: every call made an async function's frame, suspended it at the
//    `await` and resumed it from the job queue, for a result that is already there (the world is
//    synchronous: nothing a rule set calls can be awaited). componentize-js's `call` needs a
//    promise back (it adds its reactions and runs the event loop until the promise settles), so
//    the export now returns one promise, made once and already fulfilled with `undefined`, which
//    is what the async function's promise held: the export writes its result to memory before it
//    returns. A rule set's function returning a promise is refused by the kit
//    (zundoko-kit/component.js), not awaited. (187k of a 721k-fuel call at no children.)
// 5. An export lowers its result through one view of memory, made again after each allocation.
//    Generated, every field is written through `dataView($memory)`: a call of a JavaScript
//    function that reads `$memory.buffer` (a call into the engine) to compare it with the last
//    view's, about 5.8k fuel each, twenty times for the classic rules' plan. Now the lowering
//    makes a view when it starts and again right after each `$realloc` (an allocation that may
//    have grown the memory: the view made after it reaches every region allocated so far, since
//    memory only grows), and writes through it. The lowering writes only into regions `$realloc`
//    returned (a list, a variant's payload) and into the return area the host passed; a string's
//    bytes are written by the encoder through its own view (rewrite 3). A write into memory below
//    a view's size stays valid when memory grows later (see 1), so an allocation by the engine
//    itself (a string encoded) between the view and a write is harmless. (Checked in a build of
//    the classic rules whose lowering allocated 8 MiB first: the memory grew, the buffer taken
//    before kept its length, and what was written through it and through the view was read back
//    through the new buffer. Classic rules: 110k fuel less a call, 651k -> 541k at 5 children.)
//
// Each export's lift is the code from its start to its first use of the interface's result
// (`var ... = ret;`); the lowering after it, which allocates and writes memory. Bindings of any
// other shape fail the build with a message naming this file: a newer componentize-js is to be
// measured before this is dropped or changed. `installRewrite` wraps the
// splicer object componentize-js itself imports (one module instance per file), so the pinned
// package is used as installed, unpatched.

const EXPORT_START = /\n(async )?function (export_[\w$]+)\(([^)]*)\) \{\n/g;
const LIFT_END = /\n\s*var [^=;]+= ret;/g;
const READ = 'dataView($memory)';
// A little-endian read through the generated view: the getter's type and the address.
const TYPED_READ = /dataView\(\$memory\)\.get(\w+)\(([^()]*), true\)/g;
// The typed array each DataView getter reads as, and the shift of an address to its index.
const TYPED_ARRAYS = {
  Int8: ['$i8', 'Int8Array', 0],
  Uint8: ['$u8', 'Uint8Array', 0],
  Int16: ['$i16', 'Int16Array', 1],
  Uint16: ['$u16', 'Uint16Array', 1],
  Int32: ['$i32', 'Int32Array', 2],
  Uint32: ['$u32', 'Uint32Array', 2],
  BigInt64: ['$i64', 'BigInt64Array', 3],
  BigUint64: ['$u64', 'BigUint64Array', 3],
  Float32: ['$f32', 'Float32Array', 2],
  Float64: ['$f64', 'Float64Array', 3],
};
const DECODE = 'TEXT_DECODER_UTF8.decode(';
const STRING_VIEW = 'new Uint8Array($memory.buffer, ';
const FREE = /\n\s*if \(len\w+ !== 0\) \$dealloc\([^;]*\);/g;
const ALLOCATES = /\$realloc\(|_utf8AllocateAndEncode\(/;
const ENCODER_START = '\nfunction _utf8AllocateAndEncode(s, realloc, memory) {\n';
// What the generated encoder does that the native one replaces, and what it returns.
const ENCODER_STEPS = ['codepoints++;', 'const ptr = realloc(0, 0, 1, len);', 'TEXT_ENCODER_UTF8.encodeInto(', 'return res;'];
const NATIVE_ENCODER = `${ENCODER_START}  if (typeof s !== 'string') {
    throw new TypeError('expected a string, received [' + typeof s + ']');
  }
  if (s.length === 0) { return { ptr: 1, len: 0 }; }
  const bytes = TEXT_ENCODER_UTF8.encode(s);
  const len = bytes.length;
  const ptr = realloc(0, 0, 1, len);
  new Uint8Array(memory.buffer, ptr, len).set(bytes);
  return { ptr, len };
}`;

/** The bindings rewritten (see the top of this file), or an error naming what is not the shape
 * this knows. Returns the text and what was rewritten: reads through typed arrays, frees dropped,
 * encoders replaced. */
export function rewriteBindings(bindings) {
  const taken = introducedNames().filter((name) => new RegExp(`${name.replace('$', '\\$')}\\b`).test(bindings));
  if (taken.length > 0) throw new Error(`${shape()}: they already use ${taken.join(', ')}, which the rewrites introduce`);
  const lifted = liftThroughTypedArrays(bindings);
  const encoded = encodeNatively(lifted.bindings);
  const lowered = lowerThroughOneView(encoded.bindings);
  const synchronous = callSynchronously(lowered.bindings);
  return {
    bindings: synchronous.bindings,
    reads: lifted.reads,
    frees: lifted.frees,
    encoders: encoded.encoders,
    writes: lowered.writes,
    synchronous: synchronous.exports,
  };
}

/** Each export of the bindings: its name, where its body starts, and its first use of the
 * interface's result (the `var ... = ret;` match), where its lift ends and its lowering starts. */
function* exportsOf(bindings) {
  for (const start of bindings.matchAll(EXPORT_START)) {
    const bodyStart = start.index + start[0].length;
    LIFT_END.lastIndex = bodyStart;
    const liftEnd = LIFT_END.exec(bindings);
    if (liftEnd === null) throw new Error(`${shape()}: ${start[2]} never uses its result`);
    yield { name: start[2], bodyStart, liftEnd };
  }
}

/** Rewrites 1 and 2: each export's lift reads through typed arrays made once per memory buffer,
 * and frees nothing. */
export function liftThroughTypedArrays(bindings) {
  let out = '';
  let from = 0;
  let reads = 0;
  let frees = 0;
  const kinds = new Set();
  for (const { name, bodyStart, liftEnd } of exportsOf(bindings)) {
    const lift = bindings.slice(bodyStart, liftEnd.index);
    const liftReads = count(lift, READ) + count(lift, STRING_VIEW);
    if (liftReads === 0) continue;
    if (ALLOCATES.test(lift)) throw new Error(`${shape()}: ${name} allocates while it lifts`);
    const used = new Set();
    const typed = lift.replace(TYPED_READ, (read, type, address) => {
      const array = TYPED_ARRAYS[type];
      if (array === undefined) return read;
      used.add(type);
      return array[2] === 0 ? `${array[0]}[${address}]` : `${array[0]}[(${address}) >>> ${array[2]}]`;
    });
    if (typed.includes(READ)) throw new Error(`${shape()}: ${name} reads memory otherwise than by a little-endian DataView getter of a plain address`);
    used.forEach((type) => kinds.add(type));
    const locals = [...used].map((type) => TYPED_ARRAYS[type][0]);
    out += bindings.slice(from, bodyStart);
    out += '  const $liftBuffer = $memory.buffer;\n';
    out += '  if ($liftViews.buffer !== $liftBuffer) $liftViews = $liftViewsOf($liftBuffer);\n';
    const bound = [`{ ${locals.join(', ')} } = $liftViews`];
    if (lift.includes(DECODE)) bound.push('$decoder = TEXT_DECODER_UTF8');
    if (lift.includes(STRING_VIEW)) bound.push('$U8 = Uint8Array');
    out += `  const ${bound.join(', ')};\n`;
    frees += lift.match(FREE)?.length ?? 0;
    out += typed.replaceAll(DECODE, '$decoder.decode(').replaceAll(STRING_VIEW, 'new $U8($liftBuffer, ').replace(FREE, '');
    from = liftEnd.index;
    reads += liftReads;
  }
  if (reads === 0) throw new Error(`${shape()}: no export reads its arguments through ${READ}`);
  out += bindings.slice(from);
  // The arrays, made when the bindings run (so in the snapshot), again for a memory's new buffer.
  const first = out.search(EXPORT_START);
  const arrays = [...kinds].map((type) => `${TYPED_ARRAYS[type][0]}: new ${TYPED_ARRAYS[type][1]}(buffer)`);
  const views = `
// The lifts' typed arrays over memory (sdk/js/bindings-rewrite.mjs, rewrite 1).
const $liftViewsOf = (buffer) => ({ buffer, ${arrays.join(', ')} });
let $liftViews = $liftViewsOf($memory.buffer);
`;
  return { bindings: out.slice(0, first) + views + out.slice(first), reads, frees };
}

/** Rewrite 3: strings lowered by `TextEncoder.encode`. */
export function encodeNatively(bindings) {
  const start = bindings.indexOf(ENCODER_START);
  if (start < 0) throw new Error(`${shape()}: no _utf8AllocateAndEncode`);
  const end = bindings.indexOf('\n}\n', start);
  const generated = bindings.slice(start, end + 2);
  const missing = ENCODER_STEPS.filter((step) => !generated.includes(step));
  if (missing.length > 0) throw new Error(`${shape()}: _utf8AllocateAndEncode has no ${missing.join(', ')}`);
  // Callers read `ptr` and `len` only (the generated one also returned `codepoints`).
  const rest = bindings.slice(0, start) + bindings.slice(end + 2);
  if (rest.includes('.codepoints')) throw new Error(`${shape()}: a caller reads the encoded string's codepoints`);
  return { bindings: bindings.slice(0, start) + NATIVE_ENCODER + bindings.slice(end + 2), encoders: 1 };
}

// A lowering's allocation of a list or a payload, as generated: the only statement that may grow
// memory before a write into what it allocated.
const ALLOCATION = /^(\s*)var [\w$]+ = \$realloc\([^;]*\);$/;
// A write through the generated view: a DataView setter. A getter is no write (the check's message).
const WRITE = `${READ}.set`;

/** Rewrite 5: each export's lowering writes through one view, made when it starts and again after
 * each allocation. */
export function lowerThroughOneView(bindings) {
  let out = '';
  let from = 0;
  let writes = 0;
  for (const { name, liftEnd } of exportsOf(bindings)) {
    // At the function's own level, so the view declared after it is seen by all the lowering.
    if (!/\n {2}var [^\n]*$/.test(liftEnd[0])) throw new Error(`${shape()}: ${name} uses its result inside a block`);
    const lowerStart = liftEnd.index + liftEnd[0].length;
    const end = bindings.indexOf('\n}\n', lowerStart);
    if (end < 0) throw new Error(`${shape()}: ${name} has no end`);
    const lowering = bindings.slice(lowerStart, end);
    const exportWrites = count(lowering, WRITE);
    if (exportWrites === 0) continue;
    if (count(lowering, READ) !== exportWrites) throw new Error(`${shape()}: ${name} uses its lowering's view otherwise than to write through it`);
    const lines = lowering.split('\n');
    const allocations = lines.filter((line) => line.includes('$realloc(')).length;
    if (lines.filter((line) => ALLOCATION.test(line)).length !== allocations) {
      throw new Error(`${shape()}: ${name} allocates otherwise than by \`var ... = $realloc(...);\` while it lowers`);
    }
    out += bindings.slice(from, lowerStart) + '\n  let $lowerView = dataView($memory);';
    out += lines
      .map((line) => {
        const allocation = ALLOCATION.exec(line);
        const written = line.replaceAll(WRITE, '$lowerView.set');
        return allocation === null ? written : `${written}\n${allocation[1]}$lowerView = dataView($memory);`;
      })
      .join('\n');
    from = end;
    writes += exportWrites;
  }
  if (writes === 0) throw new Error(`${shape()}: no export writes its result through ${READ}`);
  return { bindings: out + bindings.slice(from), writes };
}

// What an export returns once rewritten: a promise already fulfilled with `undefined`, made when
// the bindings run (in the snapshot every call starts from).
const SETTLED = '$exportSettled';
const ASYNC_EXPORT = /\nasync function (export_[\w$]+)\(/g;

/** Rewrite 4: each `async function export_...` becomes a function that calls the rule set's
 * function without `await` and returns a settled promise. Its body must hold exactly one `await`
 * (the call of the interface's function), and return only by `return;`, last of all. */
export function callSynchronously(bindings) {
  let out = '';
  let from = 0;
  let exports = 0;
  for (const start of bindings.matchAll(ASYNC_EXPORT)) {
    const name = start[1];
    const end = bindings.indexOf('\n}\n', start.index + 1);
    if (end < 0) throw new Error(`${shape()}: ${name} has no end`);
    const body = bindings.slice(start.index + start[0].length, end);
    const awaits = count(body, 'await ');
    if (awaits !== 1) throw new Error(`${shape()}: ${name} awaits ${awaits} times, not once`);
    if (!/= await [\w$]+\(/.test(body)) throw new Error(`${shape()}: ${name} awaits something other than a call`);
    const returns = body.match(/\breturn\b[^;]*;/g) ?? [];
    if (returns.length !== 1 || returns[0] !== 'return;' || !/\n\s*return;$/.test(body)) {
      throw new Error(`${shape()}: ${name} does not end in its only \`return;\``);
    }
    out += bindings.slice(from, start.index);
    out += `\nfunction ${name}(` + body.replace('await ', '').replace(/return;$/, `return ${SETTLED};`);
    from = end;
    exports += 1;
  }
  if (exports === 0) throw new Error(`${shape()}: no export is an async function`);
  const first = bindings.search(ASYNC_EXPORT);
  out = out.slice(0, first) + `\nconst ${SETTLED} = Promise.resolve();\n` + out.slice(first) + bindings.slice(from);
  return { bindings: out, exports };
}

/** Make `splicer.spliceBindings` return rewritten bindings; `rewrites()` lists what each splice
 * rewrote (a build checks that its splice went through here). */
export function installRewrite(splicer) {
  const splice = splicer.spliceBindings;
  const rewrites = [];
  splicer.spliceBindings = (...args) => {
    const out = splice(...args);
    const { bindings, ...rewritten } = rewriteBindings(out.jsBindings);
    rewrites.push(rewritten);
    return { ...out, jsBindings: bindings };
  };
  return { rewrites: () => rewrites };
}

/** The names the rewrites add to the bindings: generated code using one would be shadowed or
 * redeclared. */
function introducedNames() {
  const arrays = Object.values(TYPED_ARRAYS).map(([name]) => name);
  return ['$liftViewsOf', '$liftViews', '$liftBuffer', '$decoder', '$U8', '$lowerView', SETTLED, ...arrays];
}

function count(text, needle) {
  return text.split(needle).length - 1;
}

function shape() {
  return 'sdk/js/bindings-rewrite.mjs: the bindings componentize-js generated are not the shape this knows';
}
