export type { TemplateRow, TemplateVersionRow } from './templates.repository.ts';
export { templateRoutes } from './templates.routes.ts';
export { forgetTeamTemplates, TEMPLATE_SEND_CACHE_TTL_MS } from './templates.send-cache.ts';
export {
  cachedTemplateForSend,
  findTemplateVersions,
  getTemplateVersion,
  resolveTemplateForSend,
} from './templates.service.ts';
