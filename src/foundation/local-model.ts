/**
 * The built-in model's name and dimension, apart from its server (src/embeddings/local-server.ts),
 * which loads TensorFlow.js: what only needs the name (configuration, the startup line) does not
 * load that.
 */
export const LOCAL_MODEL = 'use-lite-512';
export const LOCAL_MODEL_DIMS = 512;
