export { isMachineHit } from './prefetch.ts';
export { PIXEL_GIF, trackingRoutes } from './tracking.routes.ts';
export { recordTrackingHit } from './tracking.service.ts';
