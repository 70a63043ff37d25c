// The product's default rules, in JavaScript: each word is Zun or Doko with equal chance; after
// Zun Zun Zun Zun Doko, Ki-yo-shi! one interval later, and nothing more. The same engine as the
// Rust rules (rules/zundoko-classic), so both decide alike for the same input and entropy.

import { RuleSet } from 'zundoko-kit/song';
// Name, version and description: package.json's (bundled into the component when it is built).
import pkg from './package.json' with { type: 'json' };

export function classic() {
  return new RuleSet({
    info: { name: pkg.name, version: pkg.version, description: pkg.description },
    words: { zun: 'Zun', doko: 'Doko', kiyoshi: 'Ki-yo-shi!' },
    zuns: 4,
    strict: false,
  });
}
