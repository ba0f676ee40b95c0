/** The whole database schema: drizzle-kit reads this file, and so does the app. */
export * from './schema/facts.ts';
export * from './schema/embeddings.ts';
export * from './schema/tenants.ts';
export * from './schema/jobs.ts';
export * from './schema/http.ts';
export * from './schema/lifecycle.ts';
export * from './schema/episodes.ts';
