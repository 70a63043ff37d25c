// A rule set as a JavaScript author writes it, against the WIT world's bindings alone (no
// kit): Zun or Doko by `Math.random()`, and `Date.now()` read as the time. In the sandbox both
// come from the call's input (the virtual WASI: Math.random() from `observed.entropy`, Date.now()
// is `observed.now`), so the song still replays exactly: the differential test
// (host/tests/differential.rs) sings it through `simulate --seed` and through the operator with
// the same entropy, word for word. It never asks for a callback: each call says the next word
// and its own word is what calls it again. After Zun Zun Zun Zun Doko, Ki-yo-shi!, then nothing.
const CALL = ['Zun', 'Zun', 'Zun', 'Zun', 'Doko'];
const childName = (hikawa, index) => `${hikawa}-zundoko-${String(index).padStart(3, '0')}`;

export const rules = {
  info() {
    return { name: 'zundoko-js-math-random', version: '0.1.0', description: 'test fixture: Math.random() decides' };
  },

  reconcile(observed) {
    // The clock a decision reads is the call's own: anything else fails the call, naming both.
    if (BigInt(Date.now()) !== observed.now) {
      throw { tag: 'internal', val: `Date.now() is ${Date.now()}, the call's now ${observed.now}` };
    }
    if (observed.kiyoshi !== undefined) return { actions: [] };
    const { namespace, name } = observed.hikawa;
    const words = observed.zundokos.map((z) => z.word);
    const index = words.length + 1;
    if (words.slice(-5).join(' ') === CALL.join(' ')) {
      return { actions: [{ tag: 'say', val: { kind: 'kiyoshi', namespace, name: `${name}-kiyoshi`, index, word: 'Ki-yo-shi!' } }] };
    }
    const word = Math.random() < 0.5 ? 'Zun' : 'Doko';
    return { actions: [{ tag: 'say', val: { kind: 'zundoko', namespace, name: childName(name, index), index, word } }] };
  },
};
