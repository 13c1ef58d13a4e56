export type { TemplateRow, TemplateVersionRow } from './templates.repository.ts';
export { templateRoutes } from './templates.routes.ts';
export {
  createTemplateSendCache,
  TEMPLATE_SEND_CACHE_TTL_MS,
  type TemplateSendCache,
} from './templates.send-cache.ts';
export {
  cachedTemplateForSend,
  findTemplateVersions,
  getTemplate,
  getTemplateVersion,
  resolveTemplateForSend,
} from './templates.service.ts';
export {
  enqueueThumbnail,
  THUMBNAIL_VIEWPORT,
  templateJobHandlers,
  thumbnailKeyOf,
} from './templates.thumbnail.ts';
