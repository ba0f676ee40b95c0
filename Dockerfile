# One image for the API, the workers and migrations; the command picks the role.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# patches/ before the install: its postinstall (patch-package) applies them to node_modules.
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
# The console's sources: the API bundles them on the first visit to /console.
COPY console ./console
COPY workers ./workers
COPY drizzle ./drizzle
USER node
EXPOSE 3000
CMD ["node", "--import", "tsx", "src/server.ts"]
