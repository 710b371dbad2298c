//! The fakes a scenario may ask for besides the model, and the config that points the daemon at
//! them: the Bot API with `telegram = true` (see `telegram`), a transcription server (provider
//! `whisper`) and a speech server (provider `tts`) with `voice = true`, a SearXNG as the
//! `[web_search]` backend with `search = true`, the local test site (`testkit::test_site`) for
//! the browser with `test_site = true` (its address is `{{test_site}}`). They stop when dropped.

use crate::testkit::fake_search::FakeSearch;
use crate::testkit::fake_speech::FakeSpeech;
use crate::testkit::fake_transcription::FakeTranscription;
use crate::testkit::test_site::TestSite;

use super::placeholders::Values;
use super::scenario::Scenario;
use super::signal::SignalSide;
use super::telegram::TelegramSide;
use super::whatsapp::WhatsAppSide;

#[derive(Default)]
pub(super) struct Services {
    pub(super) telegram: Option<TelegramSide>,
    pub(super) whatsapp: Option<WhatsAppSide>,
    pub(super) signal: Option<SignalSide>,
    pub(super) transcription: Option<FakeTranscription>,
    speech: Option<FakeSpeech>,
    search: Option<FakeSearch>,
    site: Option<TestSite>,
}

impl Services {
    pub(super) async fn start(scenario: &Scenario) -> Result<Services, String> {
        let failed =
            |what: &str, error: std::io::Error| format!("the fake {what} did not start: {error}");
        let mut services = Services::default();
        if scenario.telegram {
            services.telegram =
                Some(TelegramSide::start(&scenario.forums, scenario.unclaimed).await?);
        }
        if scenario.whatsapp {
            services.whatsapp = Some(WhatsAppSide::start().await);
        }
        if scenario.signal {
            services.signal = Some(SignalSide::start().await);
        }
        if scenario.voice {
            services.transcription = Some(
                FakeTranscription::start("")
                    .await
                    .map_err(|error| failed("transcription server", error))?,
            );
            services.speech = Some(
                FakeSpeech::start()
                    .await
                    .map_err(|error| failed("speech server", error))?,
            );
        }
        if scenario.search {
            services.search = Some(
                FakeSearch::start()
                    .await
                    .map_err(|error| failed("search server", error))?,
            );
        }
        if scenario.test_site {
            services.site = Some(
                TestSite::start()
                    .await
                    .map_err(|error| failed("test site", error))?,
            );
        }
        Ok(services)
    }

    /// Environment variables for the daemon: the test site's password as `TEST_SITE_PASSWORD`
    /// (for a `[[browser.logins]]` entry's `password_env`).
    pub(super) fn env(&self) -> Vec<(String, String)> {
        match &self.site {
            Some(_) => vec![(
                "TEST_SITE_PASSWORD".to_string(),
                crate::testkit::test_site::PASSWORD.to_string(),
            )],
            None => Vec::new(),
        }
    }

    /// What the placeholders stand for at `now` (the test site's address, when it runs).
    pub(super) fn values(&self, now: chrono::DateTime<chrono::Utc>) -> Values {
        Values {
            now,
            test_site: self.site.as_ref().map(|site| site.url("")),
        }
    }

    pub(super) async fn stop(self) {
        if let Some(telegram) = self.telegram {
            telegram.fake.stop().await;
        }
    }

    /// The daemon's config for the services that run (the bot's table goes into the main
    /// agent's file instead).
    pub(super) fn config(&self) -> String {
        let mut config = String::new();
        if let Some(transcription) = &self.transcription {
            config.push_str(&format!(
                "\n[providers.whisper]\nkind = \"openai\"\nbase_url = \"{}\"\ntranscription_model = \"whisper-1\"\n",
                transcription.base_url()
            ));
        }
        if let Some(speech) = &self.speech {
            config.push_str(&format!(
                "\n[providers.tts]\nkind = \"openai\"\nbase_url = \"{}\"\nspeech_model = \"tts-1\"\n",
                speech.base_url()
            ));
        }
        if let Some(search) = &self.search {
            config.push_str(&format!(
                "\n[web_search]\nbackend = \"searxng\"\nurl = \"{}\"\n",
                search.base_url()
            ));
        }
        config
    }
}
