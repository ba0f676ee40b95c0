import { defineConfig } from 'drizzle-kit';

// Used only by `npm run db:generate` to write SQL migrations from src/db/schema.ts; migrations
// are applied by `mnemo migrate` (src/db/migrate.ts), never by `drizzle-kit push`.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema.ts',
  out: './drizzle',
});
