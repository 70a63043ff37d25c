// A line in the operator's log, tagged with the Hikawa being reconciled (the world's one
// import). Natively (in `node --test`) the line goes to stderr; in a component, component.js
// points it at the host. The host bounds how much one call may log.

export const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

let sink = (level, message) => console.error(`[${level[0].toUpperCase()}${level.slice(1)}] ${message}`);

/** `level`: trace, debug, info, warn or error. */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new TypeError(`log level must be one of ${LEVELS.join(', ')}, not ${level}`);
  sink(level, String(message));
}

/** For component.js: where log lines go. */
export function setLogSink(f) {
  sink = f;
}
