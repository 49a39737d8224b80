import { defineConfig } from "vitest/config";
import { svelte } from "@sveltejs/vite-plugin-svelte";
import { svelteTesting } from "@testing-library/svelte/vite";

// The desktop shell loads ui/dist from disk under a strict CSP
// (default-src 'self'), so the build is relative and fully bundled.
export default defineConfig({
  base: "./",
  plugins: [svelte(), svelteTesting()],
  clearScreen: false,
  server: {
    port: 5173,
    strictPort: true,
    host: "127.0.0.1",
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // Keep everything in files: no data: URLs that a strict CSP would refuse.
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  test: {
    environment: "jsdom",
    setupFiles: ["./src/test-setup.ts"],
    include: ["src/**/*.test.ts"],
    // The UI tests take 1-4 s each on a quiet machine; on 2 shared cores
    // under a build they took over 5 s and timed out without failing.
    testTimeout: 30_000,
  },
});
