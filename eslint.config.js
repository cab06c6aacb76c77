// ESLint for the lineage page's script (dws_dagster/views/page/assets/): `npm run
// lint`, run by `./dev test`, with no warning allowed. The page's modules are plain scripts
// that lineage_page.py joins into one <script> element, so each declares what it defines
// (`/* exported Name */`) and what it uses of the others (`/* global Name */`), and
// tests/views/test_lineage_page_script.py checks that every name a module uses comes from one
// joined before it. The vendored dagre is not ours and is not linted.
import js from "@eslint/js";
import globals from "globals";

/** Every value reaches the page as text or an attribute, never as markup. */
const AS_TEXT = "Write values as text (textContent) or attributes, never as markup.";

export default [
  {
    ignores: [
      ".venv/**",
      "node_modules/**",
      "**/_vendor/**",
      "test-artifacts/**",
      "build/**",
      "dist/**",
      "dws-demo/**",
      "example_workspace/**",
      "spark-warehouse/**",
    ],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },
  js.configs.recommended,
  {
    files: ["dws_dagster/views/page/assets/*.js"],
    languageOptions: {
      ecmaVersion: 2020,
      sourceType: "script",
      globals: { ...globals.browser, dagre: "readonly" },
    },
    rules: {
      "no-var": "error",
      "prefer-const": "error",
      eqeqeq: "error",
      "no-shadow": "error",
      "no-implicit-globals": "error",
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_" }],
      "no-use-before-define": ["error", { functions: false, classes: true, variables: true }],
      "no-restricted-syntax": [
        "error",
        { selector: "MemberExpression[property.name=/^(innerHTML|outerHTML)$/]", message: AS_TEXT },
        {
          selector:
            "CallExpression[callee.property.name=/^(insertAdjacentHTML|write|writeln|" +
            "createContextualFragment|setHTMLUnsafe|parseHTMLUnsafe|parseFromString)$/]",
          message: AS_TEXT,
        },
        {
          selector: "CallExpression[callee.name='eval'], NewExpression[callee.name='Function']",
          message: "The page runs no code made from strings (its policy forbids it too).",
        },
      ],
    },
  },
  {
    files: ["eslint.config.js"],
    languageOptions: { sourceType: "module", globals: globals.node },
  },
];
