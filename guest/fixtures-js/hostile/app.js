// A hostile JavaScript module for the host's tests (`make fixtures-langs` builds
// target/fixtures/zundoko-js-hostile.wasm), its misbehaviour chosen per call by
// `spec.params.misbehave`:
//   throw       an uncaught exception (the call traps)
//   rule-error  returns Err(invalid-params)
//   loop        an endless loop
//   alloc       grows memory without end
//   clock       reads Date.now() and new Date() (the call's now, from the virtual WASI) and
//               puts them in the status message
//   perf        reads performance.now() (the virtual monotonic clock) before and after some
//               work, likewise
//   random      reads Math.random() (drawn from the call's entropy) and puts the first values
//               in the status message
//   async       returns the classic plan in a Promise (an `async reconcile`)
//   console     writes with console.log, info, warn, error and debug, then the classic rules
//   (else)      the classic rules
import { invalidParams, param } from 'zundoko-kit';
import { exportRules } from 'zundoko-kit/component';
import { RuleSet } from 'zundoko-kit/song';
import pkg from './package.json' with { type: 'json' };

const classic = new RuleSet({
  info: { name: pkg.name, version: pkg.version, description: pkg.description },
  words: { zun: 'Zun', doko: 'Doko', kiyoshi: 'Ki-yo-shi!' },
});

function withMessage(observed, message) {
  const plan = classic.reconcile(observed);
  let status = plan.actions.find((a) => a.tag === 'set-status');
  if (status === undefined) {
    status = { tag: 'set-status', val: { phase: 'Singing', numZundokosSaid: observed.zundokos.length, kiyoshied: false, message: '' } };
    plan.actions.unshift(status);
  }
  status.val.message = message.slice(0, 200);
  return plan;
}

class Hostile {
  info() {
    return classic.info();
  }

  reconcile(observed) {
    switch (param(observed.hikawa, 'misbehave')) {
      case 'throw':
        throw new Error('hostile: thrown on purpose');
      case 'rule-error':
        throw invalidParams('hostile: params.misbehave asked for a rule error');
      case 'loop':
        for (;;) {}
      case 'alloc': {
        const hoard = [];
        for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
      }
      case 'clock':
        return withMessage(observed, `clock: Date.now ${Date.now()}, new Date ${new Date().toISOString()}`);
      case 'perf': {
        const before = performance.now();
        let sum = 0;
        for (let i = 0; i < 100000; i++) sum += i;
        return withMessage(observed, `perf: performance.now ${before}..${performance.now()} (${sum})`);
      }
      case 'async':
        return Promise.resolve(classic.reconcile(observed));
      case 'console':
        console.log('said', 1, { words: ['Zun', 'Doko'], big: 2n ** 64n });
        console.info('info line');
        console.warn('warn line', new RangeError('out of tune'));
        console.error('error line');
        console.debug('debug line', null, undefined);
        return classic.reconcile(observed);
      case 'random':
        return withMessage(observed, `random: ${[0, 1, 2].map(() => Math.random()).join(' ')}`);
      default:
        return classic.reconcile(observed);
    }
  }
}

export const rules = exportRules(new Hostile());
