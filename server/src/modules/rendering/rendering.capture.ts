/**
 * `{% capture %}` under the render's memory budget. liquidjs's own CaptureTag renders its body
 * into a fresh emitter of its own, which bypasses the output cap of rendering.liquid.ts and
 * charges nothing to `memoryLimit`: doubling a captured string 25 times built 503,316,480
 * characters (≈ 500 MB, 400 ms) before any limit noticed. Here the body is written into an
 * emitter that charges every character to the render's `memoryLimit` before keeping it, so a
 * captured string can never grow past `LIQUID_LIMITS.memory` characters: the write that
 * would pass it throws liquidjs's "memory alloc limit exceeded" (reported as LIMIT_EXCEEDED).
 * Parsing, static analysis (`children`, `localScope`) and the captured text are liquidjs's own.
 */
import { CaptureTag, type Context, type Emitter } from 'liquidjs';
import { builtinFilter } from './rendering.filters.ts';

const appendFilter = builtinFilter('append');

/**
 * Buffers a capture's body, charging its length to `context.memoryLimit` as it grows. Values
 * are printed as liquidjs's SimpleEmitter prints them (`stringify`), through liquidjs's `append`
 * filter with an empty suffix, which is also what charges the characters (liquidjs does not
 * export `stringify` itself).
 */
class ChargedEmitter implements Emitter {
  buffer = '';
  private readonly filterThis: ThisParameterType<typeof appendFilter>;

  constructor(context: Context) {
    // `append` reads only `this.context`, for its memory budget.
    this.filterThis = { context } as ThisParameterType<typeof appendFilter>;
  }

  write(html: unknown): void {
    this.buffer += appendFilter.call(this.filterThis, html, '') as string;
  }
}

/**
 * liquidjs's CaptureTag rendering its body into a {@link ChargedEmitter}: same syntax
 * (`{% capture name %}` or `{% capture "name" %}`), same value stored in the same scope.
 * @throws liquidjs AssertionError "memory alloc limit exceeded" once the render's memory budget
 *   (`LIQUID_LIMITS.memory` units, shared with ranges and filters) cannot hold the text.
 */
export class ChargedCaptureTag extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, string> {
    const emitter = new ChargedEmitter(ctx);
    yield this.liquid.renderer.renderTemplates(this.templates, ctx, emitter);
    ctx.bottom()[this.variable] = emitter.buffer;
  }
}
