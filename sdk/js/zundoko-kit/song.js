// A configurable song engine (sdk/rust/src/song.rs, decision for decision): when to say the
// next word, which word, and when to say Kiyoshi. The classic rules are this engine with their
// own words; a new rule set may use it or write its own `reconcile` (the scaffold does).

import { I64_MAX, U64_MASK, inconsistentSong, invalidParams, param, saturatingI64 } from './model.js';
import { kiyoshiName, zundokoName } from './naming.js';
import { debugStr, isBlank } from './rust.js';

export const PHASE_SINGING = 'Singing';
export const PHASE_KIYOSHIED = 'Kiyoshied';

// Parameters a Hikawa may set in `spec.params`; unknown keys are left for other rule sets.
export const PARAM_ZUN = 'zun';
export const PARAM_DOKO = 'doko';
export const PARAM_KIYOSHI = 'kiyoshi';
export const PARAM_ZUNS = 'zuns';
export const MAX_ZUNS = 16;

// What Rust's `usize::from_str` accepts: an optional `+`, then ASCII digits.
const UNSIGNED = /^\+?[0-9]+$/;

/** SplitMix64's finaliser, in u64 arithmetic (BigInt in, BigInt out): spreads every input bit
 * over the output, so consecutive entropy values (seeds 0, 1, 2, ...) still give independent words. */
export function mix(z) {
  z = (BigInt(z) + 0x9e3779b97f4a7c15n) & U64_MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64_MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64_MASK;
  return z ^ (z >> 31n);
}

// How #endsWithCall reads a word: from an array of words, or from the observed children.
const wordItself = (word) => word;
const wordOfChild = (said) => said.word;

/** The zun and doko words are the same word. */
const sameWords = (word) => invalidParams(`params.zun and params.doko must differ (both are ${debugStr(word)})`);

/** A rule set: fixed defaults (`info`, `words` {zun, doko, kiyoshi}, `zuns`, `strict`) that
 * `spec.params` may override per Hikawa. */
export class RuleSet {
  constructor({ info, words, zuns = 4, strict = false }) {
    this.module = { ...info };
    this.words = { ...words };
    // How many Zun must come before the Doko.
    this.zuns = zuns;
    // Strict: *exactly* `zuns` Zun before the Doko. Otherwise the last `zuns + 1` words decide.
    this.strict = strict;
  }

  info() {
    return { ...this.module };
  }

  /** This rule set with the Hikawa's `spec.params` applied. */
  withParams(observed) {
    const hikawa = observed.hikawa;
    if (hikawa.params.length === 0) {
      // Nothing to apply: `this` is never changed by a decision, so it serves as it is. (The
      // copy and the four lookups were half of a classic call's interpreter time.)
      if (this.words.zun === this.words.doko) throw sameWords(this.words.zun);
      return this;
    }
    const rules = new RuleSet({ info: this.module, words: this.words, zuns: this.zuns, strict: this.strict });
    for (const key of [PARAM_ZUN, PARAM_DOKO, PARAM_KIYOSHI]) {
      const word = param(hikawa, key);
      if (word !== undefined) {
        if (isBlank(word)) throw invalidParams(`params.${key} must be a non-empty word`);
        rules.words[key] = word;
      }
    }
    if (rules.words.zun === rules.words.doko) throw sameWords(rules.words.zun);
    const zuns = param(hikawa, PARAM_ZUNS);
    if (zuns !== undefined) {
      const n = UNSIGNED.test(zuns) ? BigInt(zuns) : undefined;
      if (n === undefined || n < 1n || n > BigInt(MAX_ZUNS)) {
        throw invalidParams(`params.zuns must be a whole number from 1 to ${MAX_ZUNS}, found ${debugStr(zuns)}`);
      }
      rules.zuns = Number(n);
    }
    return rules;
  }

  /** Does the song so far (an array of words) end the way that calls for Kiyoshi? */
  songComplete(said) {
    return this.#endsWithCall(said, wordItself);
  }

  /** songComplete on `items`, whose words `wordOf(item)` reads (so the engine reads the observed
   * children where they are instead of copying their words first). */
  #endsWithCall(items, wordOf) {
    const { zun, doko } = this.words;
    let i = items.length - 1;
    if ((i >= 0 ? wordOf(items[i]) : undefined) !== doko) return false;
    for (let n = 0; n < this.zuns; n++) {
      i--;
      if ((i >= 0 ? wordOf(items[i]) : undefined) !== zun) return false;
    }
    i--;
    return !(this.strict && (i >= 0 ? wordOf(items[i]) : undefined) === zun);
  }

  /** The word for this entropy (a BigInt): Zun or Doko with equal chance. */
  pickWord(entropy) {
    return mix(entropy) >> 63n === 0n ? this.words.zun : this.words.doko;
  }

  /** One decision: one word per `intervalMillis` (measured from the previous word; the first
   * at once), Kiyoshi one interval after the completing Doko, then nothing more. */
  reconcile(observed) {
    const rules = this.withParams(observed);
    const hikawa = observed.hikawa;
    const zundokos = observed.zundokos;
    const said = zundokos.length;
    for (let position = 0; position < said; position++) {
      const child = zundokos[position];
      if (child.index !== position + 1) {
        throw inconsistentSong(`expected word ${position + 1} but found ${child.index} (${child.name}): a word is missing`);
      }
    }
    const plan = { actions: [] };

    if (observed.kiyoshi !== undefined) {
      rules.#setStatus(plan, observed, said, true, 'the song is over');
      return plan;
    }

    const last = zundokos.at(-1);
    const interval = hikawa.intervalMillis;
    // Nothing said yet, or no record of when: the next word may come at once.
    const due =
      last !== undefined && last.saidAt !== undefined
        ? saturatingI64(last.saidAt + (interval < I64_MAX ? interval : I64_MAX))
        : observed.now;
    const wait = saturatingI64(due - observed.now);
    if (wait > 0n) {
      rules.#setStatus(plan, observed, said, false, `${said} words said`);
      plan.actions.push({ tag: 'requeue-after', val: wait });
      return plan;
    }

    if (rules.#endsWithCall(zundokos, wordOfChild)) {
      plan.actions.push({
        tag: 'say',
        val: { kind: 'kiyoshi', namespace: hikawa.namespace, name: kiyoshiName(hikawa.name), index: said + 1, word: rules.words.kiyoshi },
      });
      rules.#setStatus(plan, observed, said, true, `${rules.words.kiyoshi} after ${said} words`);
    } else {
      const index = said + 1;
      plan.actions.push({
        tag: 'say',
        val: { kind: 'zundoko', namespace: hikawa.namespace, name: zundokoName(hikawa.name, index), index, word: rules.pickWord(observed.entropy) },
      });
      rules.#setStatus(plan, observed, index, false, `${index} words said`);
      plan.actions.push({ tag: 'requeue-after', val: interval });
    }
    return plan;
  }

  /** Add a status update unless the observed status already says the same. */
  #setStatus(plan, observed, said, kiyoshied, message) {
    const phase = kiyoshied ? PHASE_KIYOSHIED : PHASE_SINGING;
    const status = observed.hikawa.status;
    if (status.numZundokosSaid === said && status.kiyoshied === kiyoshied && status.phase === phase) return;
    plan.actions.push({ tag: 'set-status', val: { phase, numZundokosSaid: said, kiyoshied, message } });
  }
}
