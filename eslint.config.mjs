// ESLint for the project's JavaScript: the browser client and the page
// (client_stub/web), the Foundry module (foundry/scripts and the recorder in
// foundry/tools: Foundry's globals besides the browser's) and its tests
// (Node). The recommended rules, ES modules. tests/test_static.py runs it.
import js from "@eslint/js";
import globals from "globals";

const unused = ["error", { argsIgnorePattern: "^_", caughtErrors: "none" }];

/** The globals Foundry VTT defines for a module's scripts (main.mjs reads them). */
const foundryGlobals = {
  Hooks: "readonly",
  game: "readonly",
  ui: "readonly",
  CONFIG: "readonly",
  foundry: "readonly",
  ChatMessage: "readonly",
  Dialog: "readonly",
};

export default [
  js.configs.recommended,
  {
    files: ["client_stub/web/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser },
    },
    rules: { "no-unused-vars": unused },
  },
  {
    files: ["foundry/scripts/**/*.mjs", "foundry/tools/**/*.mjs"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser, ...foundryGlobals },
    },
    rules: { "no-unused-vars": unused },
  },
  {
    files: ["foundry/test/**/*.mjs"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.node, ...globals.browser },
    },
    rules: { "no-unused-vars": unused },
  },
];
