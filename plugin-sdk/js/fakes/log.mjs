// conductor:plugin/log, faked (see ../fake-host.mjs).
import { host } from '../fake-host.mjs';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

export function log(level, message) {
  if (!LEVELS.includes(level)) throw new TypeError(`log: level ${JSON.stringify(level)} is not one of ${LEVELS.join(', ')}`);
  host.logs.push([level, String(message)]);
}
