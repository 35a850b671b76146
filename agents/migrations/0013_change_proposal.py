"""Re-approving a trusted source's held tool is proposed by one governance admin and made when
another confirms it (agents.trust_approval): a third kind of trust proposal."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0012_approval_proposal'),
    ]

    operations = [
        migrations.AlterField(
            model_name='trustproposal',
            name='kind',
            field=models.CharField(choices=[('trust', 'Mark it trusted'), ('approval', 'Loosen its approval'), ('change', 'Re-approve its change')], default='trust', max_length=16),
        ),
    ]
