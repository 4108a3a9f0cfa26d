// Swagger UI for /docs, from assets Hinge serves itself (no CDN). "Authorize" takes an API key.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
