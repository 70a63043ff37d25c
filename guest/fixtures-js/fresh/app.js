// A test fixture for the fresh-instance guarantee (`make fixtures-langs` builds
// target/fixtures/zundoko-js-fresh.wasm): it counts its calls in globals and says the count.
// Every call must see 1, since each runs in a fresh instance made from the module's snapshot:
// nothing a call leaves in memory may reach the next one.
//
// Each call also keeps `spec.params["hoard-kib"]` KiB (default 1024) in a global array, every
// byte written, so a call writes well past the snapshot's pages (the heap grows): a pool slot
// reused without being reset would show it in `hoard` as well as in `calls`.
//
// The plan: a status whose message is `calls N, hoard M` and a requeue-after of N milliseconds.
import { param } from 'zundoko-kit';
import { exportRules } from 'zundoko-kit/component';
import pkg from './package.json' with { type: 'json' };

let calls = 0;
const hoard = [];

class Fresh {
  info() {
    return { name: pkg.name, version: pkg.version, description: pkg.description };
  }

  reconcile(observed) {
    calls += 1;
    const kib = Number.parseInt(param(observed.hikawa, 'hoard-kib') ?? '1024', 10);
    hoard.push(new Uint8Array(kib * 1024).fill(0x5a));
    const message = `calls ${calls}, hoard ${hoard.length}`;
    const status = { phase: 'Singing', numZundokosSaid: observed.zundokos.length, kiyoshied: false, message };
    return { actions: [{ tag: 'set-status', val: status }, { tag: 'requeue-after', val: BigInt(calls) }] };
  }
}

export const rules = exportRules(new Fresh());
