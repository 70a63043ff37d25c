// Whole songs played natively on a virtual clock, for a rule set's own tests (`node --test`):
// the same loop the operator's `simulate` and `test` run (sdk/rust/src/testing.rs), without wasm.

import { U64_MASK, apply, nextCall, saturatingI64, says } from './model.js';
import { mix } from './song.js';

/** When every test song starts (virtual milliseconds since the epoch). */
export const T0 = 1_000_000n;
/** Decisions after which a song that has not ended is given up. */
export const MAX_DECISIONS = 100_000;

/** A brand-new Hikawa `default/hikawa-sample` with this interval (a number or BigInt) and these
 * `spec.params` (an object). */
export function newHikawa(intervalMillis, params = {}) {
  return {
    hikawa: {
      namespace: 'default',
      name: 'hikawa-sample',
      uid: 'uid-1',
      generation: 1n,
      createdAt: T0,
      intervalMillis: BigInt(intervalMillis),
      params: Object.entries(params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      status: { numZundokosSaid: 0, kiyoshied: false, phase: undefined },
    },
    zundokos: [],
    kiyoshi: undefined,
    now: T0,
    entropy: 0n,
  };
}

/** The entropy of a song's `decision`-th call (from 0), as the operator's tests draw it. */
export const entropy = (seed, decision) => mix((BigInt(seed) * 1_000_003n + BigInt(decision)) & U64_MASK);

/** Play a song: each decision's requeue advances the clock, each plan is applied as the cluster
 * would; the song ends when the rules wait for nothing. Entropy comes from `seed`, so a seed
 * replays a song exactly. A RuleError propagates. Returns {words, kiyoshi, afterKiyoshi, times,
 * decisions, plans, finalState}. */
export function sing(rules, observed, seed) {
  observed = structuredClone(observed);
  const song = { words: [], kiyoshi: undefined, afterKiyoshi: [], times: [], decisions: 0, plans: [], finalState: undefined };
  while (song.decisions < MAX_DECISIONS) {
    observed.entropy = entropy(seed, song.decisions);
    const plan = rules.reconcile(structuredClone(observed));
    song.decisions += 1;
    song.plans.push(plan);
    for (const say of says(plan)) {
      if (observed.kiyoshi !== undefined || song.kiyoshi !== undefined) {
        song.afterKiyoshi.push(say.word);
        continue;
      }
      song.times.push(observed.now);
      if (say.kind === 'zundoko') song.words.push(say.word);
      else song.kiyoshi = say.word;
    }
    if (song.afterKiyoshi.length > 0) break;
    const ms = nextCall(plan, observed);
    apply(observed, plan);
    if (ms === undefined) break;
    // `ms as i64`: a u64 above i64::MAX wraps, as in Rust.
    observed.now = saturatingI64(observed.now + BigInt.asIntN(64, BigInt(ms)));
  }
  song.finalState = observed;
  return song;
}
