import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A loader of the package `specifier`, required on its first call and kept: provider SDKs
 * (nodemailer, resend, @sendgrid/*, mailgun.js, @aws-sdk/client-sesv2, postmark, undici) load when
 * the first provider of their type is made, not at start, so an idle server never holds them
 * (issue #9, idle memory; server/test/idle-imports.test.ts). Synchronous, so creating a provider
 * stays synchronous.
 * @returns a function returning the module's exports (CommonJS `module.exports`, or the namespace of
 *   an ES module loaded through `require`).
 */
export function lazyModule<T>(specifier: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= require(specifier) as T;
    return loaded;
  };
}
