// The contract's `error`, thrown from an export (in its own module: sdk.mjs and ocm.mjs both use it).

/** The contract's `error`: thrown from an export, the host receives its `payload`. */
export class PluginError extends Error {
  constructor(tag, message) {
    super(message);
    this.name = 'PluginError';
    this.payload = { tag, val: message };
  }
}
