// The data of the WIT contract's helpers (sdk/rust/src/model.rs), on the bindings' shapes.

export const I64_MIN = -(1n << 63n);
export const I64_MAX = (1n << 63n) - 1n;
export const U64_MASK = (1n << 64n) - 1n;

/** An i64 result of Rust's saturating arithmetic. */
export function saturatingI64(value) {
  return value < I64_MIN ? I64_MIN : value > I64_MAX ? I64_MAX : value;
}

/** Why the rules could not decide: throw one from `reconcile`. The host records it on the
 * Hikawa as a condition and retries with backoff. `kind` is the WIT variant's case. */
export class RuleError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'RuleError';
    this.kind = kind;
  }
  get reason() {
    return { 'invalid-params': 'InvalidParams', 'inconsistent-song': 'InconsistentSong' }[this.kind] ?? 'RulesInternalError';
  }
}
/** `spec.params` holds a value the rules cannot use (the message names it). */
export const invalidParams = (message) => new RuleError('invalid-params', message);
/** The observed children do not form a song the rules can continue. */
export const inconsistentSong = (message) => new RuleError('inconsistent-song', message);
/** Anything else. */
export const internal = (message) => new RuleError('internal', message);

/** `spec.params[key]`, or undefined. */
export function param(hikawa, key) {
  const found = hikawa.params.find(([k]) => k === key);
  return found === undefined ? undefined : found[1];
}

/** The words said so far, in order (the Kiyoshi not included). */
export function words(observed) {
  return observed.zundokos.map((z) => z.word);
}

/** Milliseconds (a BigInt) until the next word is due: `intervalMillis` after the last word; 0n
 * for the first word or when the last word's time is unknown. */
export function waitMillis(observed) {
  const last = observed.zundokos.at(-1);
  if (last === undefined || last.saidAt === undefined) return 0n;
  const interval = observed.hikawa.intervalMillis;
  const due = saturatingI64(last.saidAt + (interval < I64_MAX ? interval : I64_MAX));
  const wait = saturatingI64(due - observed.now);
  return wait > 0n ? wait : 0n;
}

export const says = (plan) => plan.actions.filter((a) => a.tag === 'say').map((a) => a.val);
export const statusOf = (plan) => plan.actions.find((a) => a.tag === 'set-status')?.val;
export const requeueAfter = (plan) => plan.actions.find((a) => a.tag === 'requeue-after')?.val;

/** Whether carrying out `plan` changes what the rules observe: a child not there yet, or a status
 * whose phase, count or kiyoshied differs (the message is not observed). */
export function changes(plan, observed) {
  const seen = observed.hikawa.status;
  return plan.actions.some(({ tag, val }) => {
    if (tag === 'say') {
      return val.kind === 'zundoko' ? !observed.zundokos.some((z) => z.name === val.name) : observed.kiyoshi === undefined;
    }
    if (tag === 'set-status') {
      return seen.numZundokosSaid !== val.numZundokosSaid || seen.kiyoshied !== val.kiyoshied || seen.phase !== val.phase;
    }
    return false;
  });
}

/** When the host calls the rules again after `plan` (the WIT contract, as the host implements
 * it): after `requeue-after` milliseconds if the plan asks; else at once (0n) if the plan changed
 * what the rules observe; else undefined: only when something else changes. */
export function nextCall(plan, observed) {
  const ms = requeueAfter(plan);
  if (ms !== undefined) return ms;
  return changes(plan, observed) ? 0n : undefined;
}

/** One line: `say #3 Doko, status Singing(3), requeue 500 ms` (or `nothing to do`). */
export function planToString(plan) {
  if (plan.actions.length === 0) return 'nothing to do';
  return plan.actions
    .map(({ tag, val }) =>
      tag === 'say'
        ? val.kind === 'kiyoshi' ? `say ${val.word}` : `say #${val.index} ${val.word}`
        : tag === 'set-status' ? `status ${val.phase}(${val.numZundokosSaid})` : `requeue ${val} ms`,
    )
    .join(', ');
}

/** Carry out a plan on this in-memory view, the way the cluster would: children appear (a
 * create of an existing name is a no-op), the status is replaced. */
export function apply(observed, plan) {
  for (const { tag, val } of plan.actions) {
    if (tag === 'say') {
      const said = { name: val.name, index: val.index, word: val.word, saidAt: observed.now };
      if (val.kind === 'zundoko') {
        if (!observed.zundokos.some((z) => z.name === said.name)) {
          observed.zundokos.push(said);
          observed.zundokos.sort((a, b) => a.index - b.index);
        }
      } else if (observed.kiyoshi === undefined) {
        observed.kiyoshi = said;
      }
    } else if (tag === 'set-status') {
      observed.hikawa.status = { numZundokosSaid: val.numZundokosSaid, kiyoshied: val.kiyoshied, phase: val.phase };
    }
  }
}
