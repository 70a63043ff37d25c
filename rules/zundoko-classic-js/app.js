// The component's entry point (`make rules NAME=zundoko-classic-js` builds it): the rules, exported.
import { exportRules } from 'zundoko-kit/component';
import { classic } from './rules.js';

export const rules = exportRules(classic());
