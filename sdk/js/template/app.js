// The component's entry point (`make rules` builds it with componentize-js): the rules, exported.
import { exportRules } from 'zundoko-kit/component';
import { MyRules } from './rules.js';

export const rules = exportRules(new MyRules());
