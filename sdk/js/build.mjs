// Build a JavaScript rule set into a component:
//   node sdk/js/build.mjs RULES_DIR OUT.wasm [ENTRY]
// RULES_DIR/app.js (or ENTRY) and what it imports (the rule set's own modules and zundoko-kit)
// are bundled into one ES module with rolldown, then componentize-js builds the component for
// the world zundokokiyoshi:rules/zundoko-rules with the WASI features clocks and random kept and
// the others (stdio, http, fetch-event) dropped. The operator serves those imports from the
// call's input (host/src/supply/sandbox/wasi/): Date.now() is the call's `now`, performance.now()
// the virtual monotonic clock (0 when the call starts), and Math.random() reads wasi:random at
// each draw (StarlingMonkey replaces SpiderMonkey's generator, so no seed is in the
// pre-initialised snapshot), from bytes the call's `entropy` seeds: a JavaScript author's
// Math.random() < 0.5 decides, and the same input replays the same decision.
import { componentize } from '@bytecodealliance/componentize-js';
// The splicer componentize-js generates the bindings with (the file it imports itself: the package
// exports no path to it). bindings-rewrite.mjs says why and how its bindings are rewritten.
import { splicer } from './node_modules/@bytecodealliance/componentize-js/lib/spidermonkey-embedding-splicer.js';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';
import { installRewrite } from './bindings-rewrite.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const [rulesDir, out, entry = 'app.js'] = process.argv.slice(2);
if (!rulesDir || !out) {
  console.error('usage: node sdk/js/build.mjs RULES_DIR OUT.wasm [ENTRY]');
  process.exit(2);
}
const name = JSON.parse(await readFile(join(rulesDir, 'package.json'), 'utf8')).name;
const work = join(root, 'target/kits/js-build', name);
await mkdir(work, { recursive: true });
const bundlePath = join(work, 'bundle.js');

// package.json's name, version and description are the module's metadata: the kit's
// `moduleInfo()` reads them from here in a component (natively, from the file).
const bundle = await rolldown({
  input: resolve(rulesDir, entry),
  external: [/^zundokokiyoshi:/],
  resolve: { alias: { 'zundoko-kit': join(here, 'zundoko-kit') } },
  logLevel: 'warn',
});
await bundle.write({ file: bundlePath, format: 'esm', codeSplitting: false });
await bundle.close();

const rewrite = installRewrite(splicer);
const { component } = await componentize({
  sourcePath: bundlePath,
  // The WIT text itself: componentize-js's splicer only sees the working directory.
  witWorld: await readFile(join(root, 'wit/zundoko-rules.wit'), 'utf8'),
  worldName: 'zundoko-rules',
  disableFeatures: ['stdio', 'http', 'fetch-event'],
});
if (rewrite.rewrites().length !== 1) {
  console.error('sdk/js/build.mjs: componentize-js made its bindings without the splicer bindings-rewrite.mjs wraps');
  process.exit(1);
}
await mkdir(dirname(resolve(out)), { recursive: true });
await writeFile(out, component);
console.log(`${out}: ${component.length} bytes`);
