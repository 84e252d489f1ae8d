// The API's interactive docs: Swagger UI on this server's /openapi.json. "Authorize" takes a
// token from `minihpc token create USER`; it is kept for this tab only.
window.addEventListener('DOMContentLoaded', () => {
  window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true,
    persistAuthorization: false });
});
