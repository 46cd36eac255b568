/**
 * jest for the model (test/*.spec.ts). JupyterLab's packages ship ES modules: ts-jest turns
 * them into CommonJS too (transpile only, no type check of node_modules).
 */
const esModules = ['@jupyterlab', '@lumino', '@jupyter', 'lib0', 'yjs', 'y-protocols'].join('|');

module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  setupFiles: ['<rootDir>/test/jsdom-shim.js'],
  transform: {
    '^.+\\.[jt]sx?$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }]
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esModules})/)`]
};
