// __NAME__: a Zundoko rule set. Change `reconcile` and the words; `make test-rules NAME=__NAME__`
// checks them natively, `make rules NAME=__NAME__` builds the component.
//
// The rules get everything they may know in `observed` (the Hikawa, its children in order, the
// time, 64 random bits) and answer with a plan; they have no clock, no randomness and no I/O of
// their own: use `observed.now` and `observed.entropy` (BigInts) rather than Date or Math.random
// (in the component Date.now() is observed.now and Math.random() is drawn from observed.entropy,
// so a song replays either way, but natively, under node --test, they are the machine's clock
// and randomness and a test would not replay). `zundoko-kit/steps` builds the
// plans a song is made of; throw `invalidParams(...)` (or inconsistentSong, internal) from
// 'zundoko-kit' to refuse; `log('info', ...)` from 'zundoko-kit/log' writes to the operator's log.

import { waitMillis, words } from 'zundoko-kit';
import { songOver, sayKiyoshi, sayWord, wait } from 'zundoko-kit/steps';
// Name, version and description: package.json's (bundled into the component when it is built).
import pkg from './package.json' with { type: 'json' };

export const ZUN = 'Zun';
export const DOKO = 'Doko';
/** The last word of every song: said once, after the call, and nothing after it. */
export const KIYOSHI = 'Ki-yo-shi!';
/** The call that ends the song. */
export const CALL = [ZUN, ZUN, ZUN, ZUN, DOKO];

export class MyRules {
  info() {
    return { name: pkg.name, version: pkg.version, description: pkg.description };
  }

  reconcile(observed) {
    if (observed.kiyoshi !== undefined) return songOver(observed);
    if (waitMillis(observed) > 0n) return wait(observed);
    const said = words(observed);
    if (said.length >= CALL.length && CALL.every((w, i) => said[said.length - CALL.length + i] === w)) {
      return sayKiyoshi(observed, KIYOSHI);
    }
    const word = (observed.entropy & 1n) === 0n ? ZUN : DOKO;
    return sayWord(observed, word);
  }
}
