// The glue between a rule set and the WIT world `zundokokiyoshi:rules/zundoko-rules`. In a rule
// set's `app.js` (what `make rules` builds):
//
//     import { exportRules } from 'zundoko-kit/component';
//     import { MyRules } from './rules.js';
//     export const rules = exportRules(new MyRules());
//
// Only a component imports this module (natively the log import does not exist).

import { log as hostLog } from 'zundokokiyoshi:rules/log@0.1.0';
import { setLogSink } from './log.js';
import { RuleError } from './model.js';

setLogSink((level, message) => hostLog(level, message));

/** The world's `rules` export: `rules` is any object with `info()` ({name, version,
 * description}) and `reconcile(observed)` (a plan, or throws a RuleError). Any other exception
 * traps the call (the operator reports GuestTrapped); it goes to the log first, as the component
 * has no stderr: its message on a line `panic: ...`, which the host names the trap with (as the
 * Rust SDK's panic hook writes it), then the stack. */
export function exportRules(rules) {
  return {
    info() {
      const { name, version, description } = rules.info();
      return { name, version, description };
    },
    reconcile(observed) {
      try {
        return rules.reconcile(observed);
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
