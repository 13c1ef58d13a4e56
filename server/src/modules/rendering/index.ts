/**
 * Rendering: stored template (subject + EmailBuilder.js design JSON) + the caller's variables
 * → `{subject, html, text}`. Every failure an author or sender can cause is an
 * AppError INVALID_TEMPLATE with `details = {reason, issues: [{path, message}]}`, `reason`
 * one of INVALID_DESIGN, SYNTAX_ERROR, RENDER_ERROR, LIMIT_EXCEEDED. The size of the variables
 * themselves is held to {@link VariablesLimits} where a request is validated (`variablesSchema`).
 */
export {
  type CompiledTemplate,
  compileDesignHtml,
  compileTemplate,
  compileTemplateCached,
  extractVariables,
  type RenderedEmail,
  type RenderedHtml,
  renderSubjectLine,
  renderTemplate,
  renderTemplateHtml,
} from './rendering.compile.ts';
export { invalidTemplate, parseDesign, type TemplateErrorReason } from './rendering.design.ts';
export { LIQUID_LIMITS } from './rendering.liquid.ts';
export type { EmailDesign } from './rendering.schema.ts';
export {
  checkVariablesLimits,
  type VariablesLimitIssue,
  type VariablesLimits,
  variablesLimitsOf,
  variablesSchema,
} from './rendering.variables-limits.ts';
