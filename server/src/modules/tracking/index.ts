export { isMachineHit } from './prefetch.ts';
export { PIXEL_GIF, RECORD_WAIT_MS, trackingRoutes } from './tracking.routes.ts';
export { recordTrackingHit } from './tracking.service.ts';
