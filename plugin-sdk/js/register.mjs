// `node --import <sdk>/js/register.mjs --test`: plugins' `conductor:plugin/…` imports load the
// fakes (see fake-host.mjs).
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
