/* Stand-in for libpcaudio.so.0, which libespeak-ng links against for live playback.
 * The kit only writes WAV files (espeak-ng -w), so every call here fails cleanly: no audio device.
 * This spares us the real library and what it pulls in (PulseAudio, ALSA, X11, systemd...).
 * Build: gcc -shared -fPIC -O2 -Wl,-soname,libpcaudio.so.0 -o libpcaudio.so.0 pcaudio_stub.c */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct audio_object;

struct audio_object *create_audio_device_object(const char *device, const char *application_name,
                                                const char *description)
{
	(void)device; (void)application_name; (void)description;
	return NULL;
}

int audio_object_open(struct audio_object *object, int format, uint32_t rate, uint8_t channels)
{
	(void)object; (void)format; (void)rate; (void)channels;
	return ENODEV;
}

void audio_object_close(struct audio_object *object) { (void)object; }
void audio_object_destroy(struct audio_object *object) { (void)object; }

int audio_object_write(struct audio_object *object, const void *data, size_t bytes)
{
	(void)object; (void)data; (void)bytes;
	return ENODEV;
}

int audio_object_drain(struct audio_object *object) { (void)object; return ENODEV; }
int audio_object_flush(struct audio_object *object) { (void)object; return ENODEV; }

const char *audio_object_strerror(struct audio_object *object, int error)
{
	(void)object; (void)error;
	return "no audio output (stub libpcaudio: this espeak-ng can only write files, use -w)";
}
