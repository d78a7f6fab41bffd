/* Sanitize builds only (cmake/ScaletrainSanitize.cmake links this into every executable):
 * dlclose does nothing, so that Open MPI's MCA components (and any other plugin) stay mapped
 * until the process ends. LeakSanitizer reports at exit; without this, the leaks of components
 * that Open MPI unloaded at MPI_Finalize show as "<unknown module>", which no suppression can
 * match, and the leaks in our own code could not be told from them. Leaving a library loaded
 * changes nothing else for a process that is about to exit. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
