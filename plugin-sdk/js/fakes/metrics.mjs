// The fake `metrics` capability: values recorded in `host.metrics`, keyed `name{v1,v2}` (counters
// summed, gauges as last set).
import { host } from '../fake-host.mjs';

const key = (name, labels) => `${name}{${labels.join(',')}}`;

export function counterAdd(name, labels, value) {
  if (value < 0) throw new Error(`counter ${name}: ${value} is negative`);
  host.metrics.set(key(name, labels), (host.metrics.get(key(name, labels)) ?? 0) + value);
}

export function gaugeSet(name, labels, value) {
  host.metrics.set(key(name, labels), value);
}
