// Metadata lookups without download: which URLs are accepted, the yt-dlp
// runs (lightweight, then full), and the pure rules over yt-dlp's info JSON.
export * from './assess.js';
export * from './config.js';
export * from './egress.js';
export * from './extractor.js';
export * from './failures.js';
export * from './info.js';
export * from './platform-url.js';
export * from './run.js';
export * from './ytdlp-messages.js';
