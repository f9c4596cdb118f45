export * from './lib/testing/jest';
