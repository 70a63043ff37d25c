// Building blocks for a `reconcile` written from scratch (sdk/rust/src/steps.rs): the plans a
// song is made of, with the names, indexes and status the host expects.

import { waitMillis } from './model.js';
import { kiyoshiName, zundokoName } from './naming.js';
import { PHASE_KIYOSHIED, PHASE_SINGING } from './song.js';

const status = (said, kiyoshied, message) => ({
  tag: 'set-status',
  val: { phase: kiyoshied ? PHASE_KIYOSHIED : PHASE_SINGING, numZundokosSaid: said, kiyoshied, message },
});

/** Come back when the next word is due. */
export const wait = (observed) => ({ actions: [{ tag: 'requeue-after', val: waitMillis(observed) }] });

/** Say the next word (a Zundoko child), count it in the status, and come back one interval later. */
export function sayWord(observed, word) {
  const { namespace, name, intervalMillis } = observed.hikawa;
  const index = observed.zundokos.length + 1;
  return {
    actions: [
      { tag: 'say', val: { kind: 'zundoko', namespace, name: zundokoName(name, index), index, word } },
      status(index, false, `${index} words said`),
      { tag: 'requeue-after', val: intervalMillis },
    ],
  };
}

/** Say the Kiyoshi: the song's last word. Nothing may be said after it. */
export function sayKiyoshi(observed, word) {
  const { namespace, name } = observed.hikawa;
  const said = observed.zundokos.length;
  return {
    actions: [
      { tag: 'say', val: { kind: 'kiyoshi', namespace, name: kiyoshiName(name), index: said + 1, word } },
      status(said, true, `${word} after ${said} words`),
    ],
  };
}

/** After the Kiyoshi: nothing, except bringing a stale status up to date once. */
export function songOver(observed) {
  const said = observed.zundokos.length;
  const current = observed.hikawa.status;
  if (current.kiyoshied && current.numZundokosSaid === said && current.phase === PHASE_KIYOSHIED) return { actions: [] };
  return { actions: [status(said, true, 'the song is over')] };
}
