// The Zundoko rules kit for JavaScript: what a rule set in JavaScript is written against.
//
// The same contract as the Rust SDK (sdk/rust) and the WIT world (wit/zundoko-rules.wit), in
// the shapes the component's bindings use: records are objects with camelCase fields, u64 and
// s64 are BigInt (`observed.now`, `observed.entropy`, `hikawa.intervalMillis`, `said.saidAt`),
// an absent option is `undefined`, an action is `{tag: 'say' | 'set-status' | 'requeue-after',
// val}`. A rule set gets everything it may know in `observed` and returns a plan, or throws a
// RuleError. It has no clock, no randomness and no I/O of its own: the time is `observed.now`,
// 64 random bits are `observed.entropy`. In a component the operator serves `Date.now()` from
// `observed.now` and `Math.random()` from `observed.entropy` (its virtual WASI), so a decision
// by them still replays; natively (node --test) they are the machine's, so the kit's engines
// read `observed` alone.
//
// - model: RuleError (invalidParams, inconsistentSong, internal), words(), waitMillis(), apply()
// - steps: the plans a song is made of (sayWord, sayKiyoshi, wait, songOver)
// - song: the song engine the classic rules are (RuleSet), and mix, entropy to a word
// - testing: whole songs on a virtual clock, natively (sing, newHikawa)
// - component: exportRules(rules), the glue to the WIT world; log(level, message)
export * from './model.js';
export * from './naming.js';
