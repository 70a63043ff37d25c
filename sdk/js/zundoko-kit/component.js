// The glue between a rule set and the WIT world `zundokokiyoshi:rules/zundoko-rules`. In a rule
// set's `app.js` (what `make rules` builds):
//
//     import { exportRules } from 'zundoko-kit/component';
//     import { MyRules } from './rules.js';
//     export const rules = exportRules(new MyRules());
//
// Only a component imports this module (natively the log import does not exist).

import { log as hostLog } from 'zundokokiyoshi:rules/log@0.1.0';
import { warmBindingsRealm } from './bindings-realm.js';
import { setLogSink } from './log.js';
import { RuleError, waitMillis, words } from './model.js';
import { RuleSet } from './song.js';
import { sayKiyoshi, sayWord, songOver, wait } from './steps.js';

setLogSink((level, message) => hostLog(level, message));
routeConsoleToLog();
warmBindingsRealm();

/** The component is built without stdio (sdk/js/build.mjs), so `console.log` wrote nowhere: a
 * rule set's debug line vanished in the operator while `node --test` printed it. Its console
 * lines go to the operator's log instead, as Python's `print` does, at the level the method
 * names (`log` is info), bounded by the host like every log line. */
function routeConsoleToLog() {
  const levels = { trace: 'trace', debug: 'debug', log: 'info', info: 'info', warn: 'warn', error: 'error' };
  for (const [method, level] of Object.entries(levels)) {
    globalThis.console[method] = (...args) => hostLog(level, args.map(consoleText).join(' '));
  }
}

/** A console argument as node shows it, near enough: strings as they are, errors with their
 * message, plain data as JSON (BigInts as their digits), anything else as its text. */
function consoleText(value) {
  if (typeof value === 'string') return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (typeof value === 'object' && value !== null) {
    try {
      return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
    } catch {
      // Cyclic, or a toJSON that throws: its text below.
    }
  }
  return describe(value);
}

/** The world's `rules` export: `rules` is any object with `info()` ({name, version,
 * description}) and `reconcile(observed)` (a plan, or throws a RuleError). Any other exception
 * traps the call (the operator reports GuestTrapped); it goes to the log first, as the component
 * has no stderr: its message on a line `panic: ...`, which the host names the trap with (as the
 * Rust SDK's panic hook writes it), then the stack. */
export function exportRules(rules) {
  warmUp(rules);
  return {
    info() {
      const { name, version, description } = rules.info();
      return { name, version, description };
    },
    reconcile(observed) {
      try {
        const plan = rules.reconcile(observed);
        // The call is synchronous (the build's bindings do not await: sdk/js/bindings-rewrite.mjs),
        // and nothing a rule set can call needs awaiting.
        if (typeof plan?.then === 'function') {
          throw new TypeError('reconcile returned a Promise: rules decide synchronously (there is nothing to await), so declare reconcile without async');
        }
        return plan;
      } catch (e) {
        if (e instanceof RuleError) throw { tag: e.kind, val: e.message };
        // SpiderMonkey's `stack` holds only the frames: the message on a line of its own.
        hostLog('error', `panic: ${describe(e)}`);
        if (typeof e?.stack === 'string') hostLog('error', `reconcile threw from:\n${e.stack}`);
        throw e;
      }
    },
  };
}

/** What was thrown, as text, whatever it is (a value whose toString throws included). */
function describe(thrown) {
  try {
    return String(thrown);
  } catch {
    return 'a value that cannot be shown as text';
  }
}

// How often the kit's own code runs while the component is built: what SpiderMonkey does on a
// code path's first runs lands in the snapshot every call starts from, instead of being redone by
// every call (the classic rules: 43k fuel less per call, of 1.86M; most of a call's first-run
// work is the component's bindings and the engine, which the kit cannot run here).
const WARM_UP_RUNS = 4;

/** Run the kit's code on a sample song while componentize-js builds the component (the module's
 * top level runs then), so each call starts from a snapshot where that code is already warm (a
 * fresh instance per call makes every call the first). Only the kit's code runs: the song engine
 * when the rules are exactly the kit's `RuleSet`, which keeps no state between calls (on a copy
 * the kit makes, so no method a rule set put on its instance runs), else the helpers a
 * rule set written from scratch builds on (model.js, steps.js). A rule set's own `reconcile` never
 * runs here, so nothing it does is in the snapshot. Nothing here reads the clock or draws random
 * numbers, and what the warm-up makes is dropped. */
function warmUp(rules) {
  const engine =
    Object.getPrototypeOf(rules) === RuleSet.prototype
      ? new RuleSet({ info: rules.module, words: rules.words, zuns: rules.zuns, strict: rules.strict })
      : undefined;
  for (let run = 0; run < WARM_UP_RUNS; run++) {
    for (const observed of [sample(0), sample(5)]) {
      try {
        if (engine !== undefined) {
          engine.reconcile(observed);
        } else {
          if (waitMillis(observed) > 0n) wait(observed);
          words(observed);
          sayWord(observed, 'Zun');
          sayKiyoshi(observed, 'Ki-yo-shi!');
          songOver(observed);
        }
      } catch {
        // Rules the sample does not suit (zun equal to doko) refuse it: whatever a real call
        // meets, that call reports. The warm-up never fails a build.
      }
    }
  }
}

/** A Hikawa `warm-up` that has said `said` words (Zun, a second apart), at 10 s. */
function sample(said) {
  const zundokos = [];
  for (let i = 1; i <= said; i++) {
    zundokos.push({ name: `warm-up-zundoko-00${i}`, index: i, word: 'Zun', saidAt: 1_000n * BigInt(i) });
  }
  return {
    hikawa: {
      namespace: 'warm-up',
      name: 'warm-up',
      uid: '',
      generation: 1n,
      createdAt: 0n,
      intervalMillis: 500n,
      params: [],
      status: { numZundokosSaid: said, kiyoshied: false, phase: 'Singing' },
    },
    zundokos,
    kiyoshi: undefined,
    now: 10_000n,
    entropy: BigInt(said),
  };
}
