// Placeholder until the tiled kernels land (the library needs one source).
namespace attnlab::kernels {
int placeholder() { return 0; }
}  // namespace attnlab::kernels
