/** The uploads module's public face: image uploads for the builder and the public `/files/*` route. */
export { uploadRoutes } from './uploads.routes.ts';
export { detectImageType, IMAGE_TYPES } from './uploads.service.ts';
